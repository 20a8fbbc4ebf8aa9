/* backend_base64.c — standard base64, for cubins inside JSON (the cache's
 * values and the worker's parameters are JSON text). */
#include "mk_backend.h"

#include "mk_buf.h"

#include <stdlib.h>

static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

int mk_backend_base64_encode(const uint8_t *data, size_t len, mk_buf *out) {
  for (size_t i = 0; i < len; i += 3) {
    uint32_t v = (uint32_t)data[i] << 16;
    if (i + 1 < len) v |= (uint32_t)data[i + 1] << 8;
    if (i + 2 < len) v |= data[i + 2];
    char q[4] = {alphabet[(v >> 18) & 63], alphabet[(v >> 12) & 63],
                 i + 1 < len ? alphabet[(v >> 6) & 63] : '=', i + 2 < len ? alphabet[v & 63] : '='};
    mk_buf_append(out, q, 4);
  }
  return out->err;
}

static int value_of(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

int mk_backend_base64_decode(const char *text, size_t len, uint8_t **out, size_t *out_len) {
  *out = NULL;
  *out_len = 0;
  if (len % 4 != 0) return MK_EPARSE;
  uint8_t *buf = malloc(len / 4 * 3 + 1);
  if (buf == NULL) return MK_ENOMEM;
  size_t n = 0;
  for (size_t i = 0; i < len; i += 4) {
    int v[4];
    int pad = 0;
    for (int k = 0; k < 4; k++) {
      char c = text[i + k];
      /* '=' only as the last one or two characters of the text. */
      if (c == '=' && i + 4 == len && k >= 2 && (k == 3 || text[i + 3] == '=')) {
        v[k] = 0;
        pad++;
        continue;
      }
      v[k] = value_of(c);
      if (v[k] < 0 || pad) {
        free(buf);
        return MK_EPARSE;
      }
    }
    uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 | (uint32_t)v[3];
    buf[n++] = (uint8_t)(w >> 16);
    if (pad < 2) buf[n++] = (uint8_t)(w >> 8);
    if (pad < 1) buf[n++] = (uint8_t)w;
  }
  *out = buf;
  *out_len = n;
  return 0;
}

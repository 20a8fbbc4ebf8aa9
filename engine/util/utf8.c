/* utf8.c — one strictly decoded UTF-8 character (mk_utf8.h). */
#include "mk_utf8.h"

size_t mk_utf8_char(const unsigned char *p, size_t n, int *utf16_units) {
  int scratch;
  int *units = utf16_units ? utf16_units : &scratch;
  unsigned char b = p[0];
  *units = 1;
  if (b < 0x80) return 1;
  size_t len;
  unsigned char lo = 0x80, hi = 0xBF;
  if (b >= 0xC2 && b <= 0xDF) len = 2;
  else if (b >= 0xE0 && b <= 0xEF) {
    len = 3;
    if (b == 0xE0) lo = 0xA0;
    if (b == 0xED) hi = 0x9F;
  } else if (b >= 0xF0 && b <= 0xF4) {
    len = 4;
    if (b == 0xF0) lo = 0x90;
    if (b == 0xF4) hi = 0x8F;
  } else {
    return 1;
  }
  if (n < len || p[1] < lo || p[1] > hi) return 1;
  for (size_t i = 2; i < len; i++)
    if (p[i] < 0x80 || p[i] > 0xBF) return 1;
  if (len == 4) *units = 2;
  return len;
}

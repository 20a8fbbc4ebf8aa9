/* mk_utf8.h — decoding one UTF-8 character strictly, the one rule every
 * position conversion follows (the frontend's byte columns, the language
 * server's UTF-16 columns): overlong forms, surrogates, values past
 * U+10FFFF and truncated sequences are invalid, and an invalid byte is a
 * character of its own (one UTF-16 unit, as the U+FFFD an editor shows). */
#ifndef MK_UTF8_H
#define MK_UTF8_H

#include <stddef.h>

/* Length in bytes of the character at p (n >= 1 bytes available); its
 * UTF-16 length in *utf16_units (1, or 2 beyond the BMP) when not NULL. */
size_t mk_utf8_char(const unsigned char *p, size_t n, int *utf16_units);

#endif

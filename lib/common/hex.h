/*
 * hex.h - one hexadecimal digit's value, for the parsers of fragment
 * names, URLs, HTTP chunk sizes and UUIDs.
 */
#ifndef GAZ_COMMON_HEX_H
#define GAZ_COMMON_HEX_H

/* gaz_hex_digit: the value 0..15 of a hex digit of either case, or -1. */
static inline int gaz_hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

#endif

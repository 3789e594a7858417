/* The strict, allocation-free msgpack reader (see cfs_mpr in cfs.h). */
#include "common/cfs.h"

#include <string.h>

void cfs_mpr_init(struct cfs_mpr *r, const uint8_t *p, size_t len)
{
	r->p = p;
	r->len = len;
	r->off = 0;
}

/* Are n more bytes there? */
static int need(const struct cfs_mpr *r, size_t n)
{
	return r->len - r->off >= n ? 0 : -EPROTO;
}

int cfs_mpr_array(struct cfs_mpr *r, uint32_t *ret_n)
{
	size_t hdr;
	uint64_t n;
	uint8_t c;

	if (need(r, 1) < 0)
		return -EPROTO;
	c = r->p[r->off];
	if (c >= 0x90 && c <= 0x9f) {
		hdr = 1;
		n = c & 0x0f;
	} else if (c == 0xdc || c == 0xdd) {
		hdr = c == 0xdc ? 3 : 5;
		if (need(r, hdr) < 0)
			return -EPROTO;
		n = cfs_get_be_n(r->p + r->off + 1, (unsigned)hdr - 1);
	} else {
		return -EPROTO;
	}
	if (n > r->len - r->off - hdr) /* every item takes at least a byte */
		return -EPROTO;
	r->off += hdr;
	*ret_n = (uint32_t)n;
	return 0;
}

int cfs_mpr_array_n(struct cfs_mpr *r, uint32_t n)
{
	size_t save = r->off;
	uint32_t got;
	if (cfs_mpr_array(r, &got) < 0 || got != n) {
		r->off = save;
		return -EPROTO;
	}
	return 0;
}

/* Integers in any msgpack width; *neg set for negative values. */
static int read_int(struct cfs_mpr *r, uint64_t *ret, bool *neg)
{
	uint8_t c;
	unsigned w;

	if (need(r, 1) < 0)
		return -EPROTO;
	c = r->p[r->off];
	*neg = false;
	if (c <= 0x7f) {
		*ret = c;
		r->off++;
		return 0;
	}
	if (c >= 0xe0) {
		*ret = (uint64_t)(int64_t)(int8_t)c;
		*neg = true;
		r->off++;
		return 0;
	}
	switch (c) {
	case 0xcc: case 0xd0: w = 1; break;
	case 0xcd: case 0xd1: w = 2; break;
	case 0xce: case 0xd2: w = 4; break;
	case 0xcf: case 0xd3: w = 8; break;
	default: return -EPROTO;
	}
	if (need(r, 1 + w) < 0)
		return -EPROTO;
	uint64_t v = cfs_get_be_n(r->p + r->off + 1, w);
	if (c >= 0xd0) { /* signed: sign-extend */
		if (w < 8 && (v >> (8 * w - 1)) & 1)
			v |= ~0ull << (8 * w);
		*neg = (int64_t)v < 0;
	}
	*ret = v;
	r->off += 1 + w;
	return 0;
}

int cfs_mpr_uint(struct cfs_mpr *r, uint64_t max, uint64_t *ret)
{
	size_t save = r->off;
	uint64_t v;
	bool neg;

	if (read_int(r, &v, &neg) < 0 || neg || v > max) {
		r->off = save;
		return -EPROTO;
	}
	*ret = v;
	return 0;
}

int cfs_mpr_int(struct cfs_mpr *r, int64_t *ret)
{
	size_t save = r->off;
	uint64_t v;
	bool neg;
	uint8_t c = r->off < r->len ? r->p[r->off] : 0;

	if (read_int(r, &v, &neg) < 0 || (!neg && c == 0xcf && v > INT64_MAX)) {
		r->off = save;
		return -EPROTO;
	}
	*ret = (int64_t)v;
	return 0;
}

static int read_raw(struct cfs_mpr *r, bool bin, size_t min, size_t max, struct cfs_bytes *ret)
{
	size_t hdr;
	uint64_t n;
	uint8_t c;

	if (need(r, 1) < 0)
		return -EPROTO;
	c = r->p[r->off];
	if (!bin && c >= 0xa0 && c <= 0xbf) {
		hdr = 1;
		n = c & 0x1f;
	} else if ((bin && (c == 0xc4 || c == 0xc5 || c == 0xc6)) ||
	           (!bin && (c == 0xd9 || c == 0xda || c == 0xdb))) {
		hdr = (c == 0xc4 || c == 0xd9) ? 2 : (c == 0xc5 || c == 0xda) ? 3 : 5;
		if (need(r, hdr) < 0)
			return -EPROTO;
		n = cfs_get_be_n(r->p + r->off + 1, (unsigned)hdr - 1);
	} else {
		return -EPROTO;
	}
	if (n > r->len - r->off - hdr || n < min || n > max)
		return -EPROTO;
	ret->p = r->p + r->off + hdr;
	ret->len = (size_t)n;
	r->off += hdr + (size_t)n;
	return 0;
}

int cfs_mpr_bin(struct cfs_mpr *r, size_t min, size_t max, struct cfs_bytes *ret)
{
	return read_raw(r, true, min, max, ret);
}

int cfs_mpr_str(struct cfs_mpr *r, size_t min, size_t max, struct cfs_bytes *ret)
{
	return read_raw(r, false, min, max, ret);
}

int cfs_mpr_expect_str(struct cfs_mpr *r, const char *s)
{
	size_t save = r->off, n = strlen(s);
	struct cfs_bytes b;

	if (cfs_mpr_str(r, n, n, &b) < 0 || memcmp(b.p, s, n) != 0) {
		r->off = save;
		return -EPROTO;
	}
	return 0;
}

int cfs_mpr_end(const struct cfs_mpr *r)
{
	return r->off == r->len ? 0 : -EPROTO;
}

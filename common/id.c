/* Identifiers on the 2^256 circle, and UDP addresses. */
#include "common/cfs.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cfs_id_cmp(const struct cfs_id *a, const struct cfs_id *b)
{
	return memcmp(a->b, b->b, CFS_ID_BYTES);
}

bool cfs_id_eq(const struct cfs_id *a, const struct cfs_id *b)
{
	return memcmp(a->b, b->b, CFS_ID_BYTES) == 0;
}

bool cfs_id_is_zero(const struct cfs_id *a)
{
	static const struct cfs_id zero;
	return cfs_id_eq(a, &zero);
}

void cfs_id_add(struct cfs_id *ret, const struct cfs_id *a, const struct cfs_id *b)
{
	unsigned carry = 0;
	for (int i = CFS_ID_BYTES - 1; i >= 0; i--) {
		unsigned s = (unsigned)a->b[i] + b->b[i] + carry;
		ret->b[i] = (uint8_t)s;
		carry = s >> 8;
	}
}

void cfs_id_sub(struct cfs_id *ret, const struct cfs_id *a, const struct cfs_id *b)
{
	int borrow = 0;
	for (int i = CFS_ID_BYTES - 1; i >= 0; i--) {
		int d = (int)a->b[i] - (int)b->b[i] - borrow;
		borrow = d < 0;
		ret->b[i] = (uint8_t)(d + (borrow ? 256 : 0));
	}
}

void cfs_id_distance(struct cfs_id *ret, const struct cfs_id *from, const struct cfs_id *to)
{
	cfs_id_sub(ret, to, from);
}

void cfs_id_add_pow2(struct cfs_id *ret, const struct cfs_id *a, unsigned i)
{
	struct cfs_id p = { { 0 } };

	if (i >= CFS_ID_BITS) {
		*ret = *a;
		return;
	}
	p.b[CFS_ID_BYTES - 1 - i / 8] = (uint8_t)(1u << (i % 8));
	cfs_id_add(ret, a, &p);
}

void cfs_id_shr(struct cfs_id *ret, const struct cfs_id *a, unsigned bits)
{
	struct cfs_id r = { { 0 } };
	unsigned by = bits / 8, bi = bits % 8;

	for (int i = CFS_ID_BYTES - 1; i >= (int)by; i--) {
		unsigned src = (unsigned)i - by;
		unsigned v = a->b[src] >> bi;
		if (bi && src > 0)
			v |= (unsigned)a->b[src - 1] << (8 - bi);
		r.b[i] = (uint8_t)v;
	}
	*ret = r;
}

/* x in (a, b): strictly after a and strictly before b, going clockwise. */
bool cfs_id_in_oo(const struct cfs_id *x, const struct cfs_id *a, const struct cfs_id *b)
{
	int ab = cfs_id_cmp(a, b);
	if (ab < 0)
		return cfs_id_cmp(a, x) < 0 && cfs_id_cmp(x, b) < 0;
	if (ab > 0) /* wraps past 2^256 - 1 */
		return cfs_id_cmp(a, x) < 0 || cfs_id_cmp(x, b) < 0;
	return !cfs_id_eq(x, a); /* (a, a): the whole circle but a */
}

bool cfs_id_in_oc(const struct cfs_id *x, const struct cfs_id *a, const struct cfs_id *b)
{
	return cfs_id_eq(x, b) || cfs_id_in_oo(x, a, b);
}

bool cfs_id_in_co(const struct cfs_id *x, const struct cfs_id *a, const struct cfs_id *b)
{
	return cfs_id_eq(x, a) || cfs_id_in_oo(x, a, b);
}

double cfs_id_to_unit(const struct cfs_id *a)
{
	uint64_t top = 0;
	for (int i = 0; i < 8; i++)
		top = (top << 8) | a->b[i];
	return (double)(top >> 11) * 0x1.0p-53; /* 53 bits: always below 1 */
}

const char *cfs_id_hex(const struct cfs_id *a, char buf[static 65])
{
	static const char hx[] = "0123456789abcdef";
	for (int i = 0; i < CFS_ID_BYTES; i++) {
		buf[2 * i] = hx[a->b[i] >> 4];
		buf[2 * i + 1] = hx[a->b[i] & 15];
	}
	buf[64] = 0;
	return buf;
}

const char *cfs_id_short(const struct cfs_id *a, char buf[static 9])
{
	char full[65];
	cfs_id_hex(a, full);
	memcpy(buf, full, 8);
	buf[8] = 0;
	return buf;
}

/* ------------------------------------------------------------ addresses */

int cfs_addr_from_ip(struct cfs_addr *ret, const char *ip, uint16_t port)
{
	memset(ret, 0, sizeof(*ret));
	if (inet_pton(AF_INET, ip, &ret->in4.sin_addr) == 1) {
		ret->in4.sin_family = AF_INET;
		ret->in4.sin_port = htons(port);
		return 0;
	}
	if (inet_pton(AF_INET6, ip, &ret->in6.sin6_addr) == 1) {
		ret->in6.sin6_family = AF_INET6;
		ret->in6.sin6_port = htons(port);
		return 0;
	}
	return -EINVAL;
}

int cfs_addr_parse(struct cfs_addr *ret, const char *s)
{
	char host[256];
	const char *port_s;
	size_t hlen;

	if (s[0] == '[') {
		const char *end = strchr(s, ']');
		if (!end || end[1] != ':')
			goto bad;
		hlen = (size_t)(end - s - 1);
		if (hlen >= sizeof(host))
			goto bad;
		memcpy(host, s + 1, hlen);
		port_s = end + 2;
	} else {
		const char *colon = strrchr(s, ':');
		if (!colon) {
			strcpy(host, "127.0.0.1");
			port_s = s;
		} else {
			if (strchr(s, ':') != colon)
				goto bad; /* bare IPv6 needs brackets */
			hlen = (size_t)(colon - s);
			if (hlen == 0 || hlen >= sizeof(host))
				goto bad;
			memcpy(host, s, hlen);
			port_s = colon + 1;
		}
		if (colon)
			host[hlen] = 0;
	}
	if (s[0] == '[')
		host[hlen] = 0;

	char *endp;
	if (!*port_s)
		goto bad;
	unsigned long port = strtoul(port_s, &endp, 10);
	if (*endp || port == 0 || port > 65535)
		goto bad;
	if (cfs_addr_from_ip(ret, host, (uint16_t)port) == 0)
		return 0;

	/* A name that does not resolve is not bad syntax */
	struct addrinfo hints = { .ai_socktype = SOCK_DGRAM }, *res = NULL;
	int e = getaddrinfo(host, NULL, &hints, &res);
	if (e != 0 || !res) {
		log_error("cannot resolve the host name '%s' (in '%s'): %s", host, s,
		          e == EAI_SYSTEM ? strerror(errno) : e ? gai_strerror(e) : "no address");
		return -EADDRNOTAVAIL;
	}
	memset(ret, 0, sizeof(*ret));
	memcpy(&ret->sa, res->ai_addr, res->ai_addrlen);
	freeaddrinfo(res);
	if (ret->sa.sa_family == AF_INET)
		ret->in4.sin_port = htons((uint16_t)port);
	else if (ret->sa.sa_family == AF_INET6)
		ret->in6.sin6_port = htons((uint16_t)port);
	else
		goto bad;
	return 0;
bad:
	log_error("bad address '%s': expected HOST:PORT, [IPV6]:PORT or PORT", s);
	return -EINVAL;
}

const char *cfs_addr_str(const struct cfs_addr *a, char buf[static CFS_ADDR_STRLEN])
{
	char ip[INET6_ADDRSTRLEN];

	if (a->sa.sa_family == AF_INET) {
		inet_ntop(AF_INET, &a->in4.sin_addr, ip, sizeof(ip));
		snprintf(buf, CFS_ADDR_STRLEN, "%s:%u", ip, ntohs(a->in4.sin_port));
	} else if (a->sa.sa_family == AF_INET6) {
		inet_ntop(AF_INET6, &a->in6.sin6_addr, ip, sizeof(ip));
		snprintf(buf, CFS_ADDR_STRLEN, "[%s]:%u", ip, ntohs(a->in6.sin6_port));
	} else {
		snprintf(buf, CFS_ADDR_STRLEN, "(none)");
	}
	return buf;
}

bool cfs_addr_eq(const struct cfs_addr *a, const struct cfs_addr *b)
{
	if (a->sa.sa_family != b->sa.sa_family)
		return false;
	if (a->sa.sa_family == AF_INET)
		return a->in4.sin_port == b->in4.sin_port &&
		       a->in4.sin_addr.s_addr == b->in4.sin_addr.s_addr;
	if (a->sa.sa_family == AF_INET6)
		return a->in6.sin6_port == b->in6.sin6_port &&
		       memcmp(&a->in6.sin6_addr, &b->in6.sin6_addr, 16) == 0;
	return false;
}

uint16_t cfs_addr_port(const struct cfs_addr *a)
{
	if (a->sa.sa_family == AF_INET)
		return ntohs(a->in4.sin_port);
	if (a->sa.sa_family == AF_INET6)
		return ntohs(a->in6.sin6_port);
	return 0;
}

socklen_t cfs_addr_len(const struct cfs_addr *a)
{
	return a->sa.sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
	                                   : sizeof(struct sockaddr_in);
}

size_t cfs_addr_ip_bytes(const struct cfs_addr *a, const uint8_t **ret_ip)
{
	if (a->sa.sa_family == AF_INET6) {
		*ret_ip = a->in6.sin6_addr.s6_addr;
		return 16;
	}
	*ret_ip = (const uint8_t *)&a->in4.sin_addr.s_addr;
	return 4;
}

bool cfs_addr_same_ip(const struct cfs_addr *a, const struct cfs_addr *b)
{
	const uint8_t *x, *y;
	size_t n = cfs_addr_ip_bytes(a, &x);

	return a->sa.sa_family == b->sa.sa_family && cfs_addr_ip_bytes(b, &y) == n &&
	       memcmp(x, y, n) == 0;
}

void cfs_node_id(struct cfs_id *ret, const struct cfs_addr *a, uint32_t vindex)
{
	struct cfs_hasher h;
	const uint8_t *ip;
	size_t iplen = cfs_addr_ip_bytes(a, &ip);
	uint8_t tail[4];

	/* PROTOCOL.md "Node IDs": the port is not hashed, so one IP holds at most
	 * CFS_VNODE_INDEX_MAX positions whatever ports it binds. */
	cfs_put_be32(tail, vindex);
	cfs_hasher_init(&h);
	cfs_hasher_update(&h, ip, iplen);
	cfs_hasher_update(&h, tail, sizeof(tail));
	cfs_hasher_final(&h, ret);
}

int cfs_id_from_hex(struct cfs_id *ret, const char *s)
{
	if (strlen(s) != 2 * CFS_ID_BYTES)
		return -EINVAL;
	for (int i = 0; i < 2 * CFS_ID_BYTES; i++) {
		int c = s[i], v;
		if (c >= '0' && c <= '9')
			v = c - '0';
		else if (c >= 'a' && c <= 'f')
			v = c - 'a' + 10;
		else if (c >= 'A' && c <= 'F')
			v = c - 'A' + 10;
		else
			return -EINVAL;
		if (i % 2 == 0)
			ret->b[i / 2] = (uint8_t)(v << 4);
		else
			ret->b[i / 2] |= (uint8_t)v;
	}
	return 0;
}

/* ---- the id map */

bool cfs_idmap_get(const struct cfs_idmap *m, const struct cfs_id *k, uint32_t *ret)
{
	const uint32_t *v = cfs_htab_get(&m->t, k);

	if (v && ret)
		*ret = *v;
	return v != NULL;
}

void cfs_idmap_put(struct cfs_idmap *m, const struct cfs_id *k, uint32_t v)
{
	if (!m->t.esize)
		cfs_htab_init(&m->t, sizeof(*k), sizeof(v));
	*(uint32_t *)cfs_htab_put(&m->t, k, NULL) = v;
}

void cfs_idmap_free(struct cfs_idmap *m)
{
	cfs_htab_free(&m->t);
}

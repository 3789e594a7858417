/*
 * Port mapping on a home router, so that a volunteer behind a NAT can be
 * a member: NAT-PMP (RFC 6886, Debian's libnatpmp) to the default
 * gateway first, then UPnP-IGD (libminiupnpc: SSDP discovery, then the
 * IGD's AddPortMapping). The same external port as ours is asked for: a
 * node's address is what peers send to, and our socket has one port.
 *
 * These libraries block; a mapping is asked for at start (before the
 * ring is joined: the public address goes into our node IDs) and renewed
 * from a timer, each call bounded by wait_ms per protocol.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/select.h>
#include <sys/time.h>

#include <miniupnpc/miniupnpc.h>
#include <miniupnpc/upnpcommands.h>
#include <natpmp.h>

#include "cfsd/cfsd.h"

/* Wait for a NAT-PMP answer until deadline_ms (monotonic): 0, or < 0. */
static int natpmp_wait(natpmp_t *n, natpmpresp_t *resp, uint64_t deadline_ms)
{
	for (;;) {
		fd_set fds;
		struct timeval tv;
		uint64_t now = cfs_now_ms();
		if (now >= deadline_ms)
			return -ETIMEDOUT;
		FD_ZERO(&fds);
		FD_SET(n->s, &fds);
		getnatpmprequesttimeout(n, &tv);
		uint64_t left = deadline_ms - now, t = (uint64_t)tv.tv_sec * 1000 + (uint64_t)tv.tv_usec / 1000;
		if (t > left)
			t = left;
		tv.tv_sec = (time_t)(t / 1000);
		tv.tv_usec = (suseconds_t)(t % 1000) * 1000;
		(void)select(n->s + 1, &fds, NULL, NULL, &tv);
		int r = readnatpmpresponseorretry(n, resp);
		if (r != NATPMP_TRYAGAIN)
			return r < 0 ? -EPROTO : 0;
	}
}

static int map_natpmp(uint16_t port, uint32_t lifetime_s, uint32_t wait_ms, char *pub, size_t publen)
{
	natpmp_t n;
	natpmpresp_t resp;
	int r;

	if (initnatpmp(&n, 0, 0) < 0)
		return -ENETUNREACH; /* no default gateway */
	uint64_t deadline = cfs_now_ms() + wait_ms;
	if (sendpublicaddressrequest(&n) < 0 || (r = natpmp_wait(&n, &resp, deadline)) < 0 ||
	    resp.type != NATPMP_RESPTYPE_PUBLICADDRESS) {
		closenatpmp(&n);
		return -ETIMEDOUT;
	}
	inet_ntop(AF_INET, &resp.pnu.publicaddress.addr, pub, (socklen_t)publen);
	if (sendnewportmappingrequest(&n, NATPMP_PROTOCOL_UDP, port, port, lifetime_s) < 0 ||
	    (r = natpmp_wait(&n, &resp, deadline)) < 0 || resp.type != NATPMP_RESPTYPE_UDPPORTMAPPING) {
		closenatpmp(&n);
		return -ETIMEDOUT;
	}
	closenatpmp(&n);
	return resp.pnu.newportmapping.mappedpublicport == port ? 0 : -EADDRINUSE;
}

static int map_upnp(uint16_t port, uint32_t lifetime_s, uint32_t wait_ms, char *pub, size_t publen)
{
	struct UPNPUrls urls;
	struct IGDdatas data;
	char lan[64] = "", ext[64] = "", ps[8], life[16];
	int err = 0, r = -ENODEV;
	struct UPNPDev *devs = upnpDiscover((int)wait_ms, NULL, NULL, 0, 0, 2, &err);

	if (!devs)
		return -ENODEV;
	if (UPNP_GetValidIGD(devs, &urls, &data, lan, sizeof(lan)) == 1) {
		snprintf(ps, sizeof(ps), "%u", port);
		snprintf(life, sizeof(life), "%u", lifetime_s);
		if (UPNP_GetExternalIPAddress(urls.controlURL, data.first.servicetype, ext) != 0 || !ext[0])
			r = -EPROTO;
		else if (UPNP_AddPortMapping(urls.controlURL, data.first.servicetype, ps, ps, lan, "cfsd", "UDP",
		                             NULL, life) != 0)
			r = -EACCES;
		else
			r = 0;
		snprintf(pub, publen, "%s", ext);
		FreeUPNPUrls(&urls);
	}
	freeUPNPDevlist(devs);
	return r;
}

int cfsd_portmap(uint16_t port, uint32_t lifetime_s, uint32_t wait_ms, char *ret_pub, size_t publen,
                 const char **ret_how)
{
	int r;

	ret_pub[0] = 0;
	if ((r = map_natpmp(port, lifetime_s, wait_ms, ret_pub, publen)) == 0) {
		*ret_how = "NAT-PMP";
		return 0;
	}
	if (r == -ENETUNREACH)
		return r; /* no gateway: nothing to ask */
	if ((r = map_upnp(port, lifetime_s, wait_ms, ret_pub, publen)) == 0) {
		*ret_how = "UPnP-IGD";
		return 0;
	}
	return r;
}

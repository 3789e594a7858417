/*
 * libFuzzer target: the frames of messages as pieces and the two transfer state
 * machines they drive. The input is a run of datagrams, each a 2-byte
 * big-endian length and its bytes. Each is decoded as a piece, an ack, a
 * retry or a validation; pieces feed one reassembly (those of another
 * length are refused), acks feed one outgoing transfer of a 50,000-byte
 * message whose pieces are sent as its window allows, with a clock that
 * moves on at every datagram. Whatever the datagrams, decoders either
 * accept or refuse with a reason, the reassembly never writes past its
 * buffer, every ack it builds decodes again, and the window's count of
 * bytes in flight is exactly what the transfer has in flight.
 */
#include <stdlib.h>
#include <string.h>

#include "common/xfer.h"

#define OUT_LEN 50000

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct xfer_in *xi = NULL;
	struct xfer_cc cc;
	uint8_t *msg = malloc(OUT_LEN), ab[XFER_ACK_HDR + XFER_ACK_BITMAP_MAX];
	uint64_t now = 1000000;

	memset(msg, 0x5a, OUT_LEN);
	struct xfer_out *xo = cfs_xfer_out_new(7, 0, msg, OUT_LEN, now);
	cfs_xfer_cc_init(&cc, 0);
	while (size >= 2) {
		size_t len = (size_t)data[0] << 8 | data[1];
		data += 2;
		size -= 2;
		if (len > size)
			len = size;
		const uint8_t *p = data;
		data += len;
		size -= len;
		now += 300;

		/* the sender sends what its window allows */
		uint16_t idx[64];
		unsigned n = cfs_xfer_out_peek(xo, idx, 64);
		for (unsigned k = 0; k < n; k++) {
			uint64_t wait;
			uint32_t b = cfs_xfer_out_piece_len(xo, idx[k]);
			if (!cfs_xfer_cc_can_send(&cc, b, false, now, &wait))
				break;
			cfs_xfer_out_sent(xo, idx[k], now);
			cfs_xfer_cc_sent(&cc, b, false, now);
		}

		const char *why = NULL;
		struct xfer_piece pc;
		struct xfer_ack a, a2;
		struct xfer_ack_result r;
		uint8_t tok[XFER_TOKEN_BYTES];
		uint64_t reqid;
		if (len && p[0] == XFER_PIECE) {
			if (cfs_xfer_piece_decode(p, len, &pc, &why) < 0) {
				if (!why)
					abort();
				continue;
			}
			if (pc.len > XFER_PIECE_DATA || pc.index >= cfs_xfer_npieces(pc.msg_len))
				abort();
			if (!xi)
				xi = cfs_xfer_in_new(&pc, now);
			if (cfs_xfer_in_piece(xi, &pc, now) < 0 && pc.msg_len == xi->len)
				abort(); /* only another length is refused */
			cfs_xfer_in_ack(xi, now, &a);
			size_t al = cfs_xfer_ack_encode(ab, &a);
			if (cfs_xfer_ack_decode(ab, al, &a2, &why) < 0 || a2.first_missing != a.first_missing)
				abort();
			if (cfs_xfer_in_complete(xi) != (a.first_missing == xi->npieces))
				abort();
		} else if (len && p[0] == XFER_ACK) {
			if (cfs_xfer_ack_decode(p, len, &a, &why) < 0) {
				if (!why)
					abort();
				continue;
			}
			cfs_xfer_out_on_ack(xo, &a, now, &cc, &r);
		} else if (len && p[0] == XFER_RETRY) {
			(void)cfs_xfer_retry_decode(p, len, &reqid, tok);
		} else if (len && p[0] == XFER_VALIDATE) {
			(void)cfs_xfer_validate_decode(p, len, tok);
		} else {
			now += cfs_xfer_cc_pto_us(&cc); /* silence: the timers fire */
			if (cfs_xfer_out_on_timer(xo, now, &cc, &r) == -ETIMEDOUT)
				break;
		}
		if (cc.in_flight != cfs_xfer_out_counted(xo) || xo->nacked > xo->npieces)
			abort();
	}
	cfs_xfer_out_free(xo);
	cfs_xfer_in_free(xi);
	return 0;
}

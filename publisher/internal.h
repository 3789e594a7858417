/* publisher/ internals: the sinks behind pub_sink_open. */
#ifndef CFS_PUBLISHER_INTERNAL_H
#define CFS_PUBLISHER_INTERNAL_H

#include "publisher/publisher.h"

/* The DHT store through the local daemon at sock (NULL: the default). */
int pub__cfsdsink_open(uv_loop_t *loop, const char *sock, struct pub_sink *ret) CFS_WUR;

#endif

/* cfsd's Prometheus text, from a status report (cfsd/metrics.c). */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "cfsd/metrics.h"

Test(metrics, named_series_typed_others_by_path)
{
	static const char json[] =
		"{\"version\":\"0.1.0\",\"uptime_s\":42,\"rpc\":{\"calls\":17,\"srtt_us\":1500,"
		"\"bytes_in\":5171},\"ring\":{\"estimated_n\":3.0,\"coord\":[0.1,0.2],"
		"\"vnodes\":[{\"index\":0,\"rtt_us\":9}]},\"dhash\":{\"sync\":{\"pushed\":4,"
		"\"ok\":true}},\"neighbours\":[]}\n";
	struct cfs_sbuf b = { 0 };

	cr_assert_eq(cfsd_metrics_from_json(json, &b), 0);
	cr_assert(strstr(b.p, "# HELP cfs_rpc_out_total RPCs this server sent (calls made).\n"
	                      "# TYPE cfs_rpc_out_total counter\ncfs_rpc_out_total 17\n"), "%s", b.p);
	cr_assert(strstr(b.p, "# TYPE cfs_rpc_srtt_seconds gauge\ncfs_rpc_srtt_seconds 0.0015\n"), "%s", b.p);
	cr_assert(strstr(b.p, "\ncfs_network_in_bytes_total 5171\n"), "%s", b.p);
	cr_assert(strstr(b.p, "\ncfs_uptime_seconds 42\n"), "%s", b.p);
	cr_assert(strstr(b.p, "\ncfs_ring_estimated_size 3\n"), "%s", b.p);
	cr_assert(strstr(b.p, "# TYPE cfs_status gauge\n"), "%s", b.p);
	cr_assert(strstr(b.p, "cfs_status{path=\"dhash.sync.pushed\"} 4\n"), "%s", b.p);
	cr_assert(strstr(b.p, "cfs_status{path=\"dhash.sync.ok\"} 1\n"), "%s", b.p);
	/* named series are not repeated; arrays and strings are not series */
	cr_assert_null(strstr(b.p, "path=\"rpc.calls\""));
	cr_assert_null(strstr(b.p, "vnodes"));
	cr_assert_null(strstr(b.p, "version"));
	/* a series absent from the report is left out, not made up */
	cr_assert_null(strstr(b.p, "cfs_client_gets_total"));
	free(b.p);
}

Test(metrics, refuses_what_is_not_a_json_object)
{
	static const char *const bad[] = {
		"", "[1]", "{\"a\":}", "{\"a\":1", "{\"a\":1}}", "{\"a\":\"x}", "{\"a\":nope}",
		"{\"a\":{\"b\":{\"c\":{\"d\":{\"e\":{\"f\":{\"g\":{\"h\":{\"i\":1}}}}}}}}}",
	};
	for (size_t i = 0; i < CFS_ARRAY_SIZE(bad); i++) {
		struct cfs_sbuf b = { 0 };
		cr_assert_eq(cfsd_metrics_from_json(bad[i], &b), -EPROTO, "accepted %s", bad[i]);
		free(b.p);
	}
}

// Collectors for the daemons' own state, read at scrape time:
//   ChunkStoreCollector  chunkd: stripefs_chunk_store_* (chunks, bytes
//                        stored/free/capacity/reserved, reads, writes, CRC
//                        errors) from ChunkService::Stats().
//   ChunkEngineCollector chunkd: stripefs_chunk_engine_* (group commits,
//                        committed and batched ops, data and index syncs,
//                        patches in place and whole, version cache hits,
//                        misses and bytes; the time in writes, queues,
//                        batches and syncs as *_seconds_total) from
//                        ChunkStore::Counters(): what a write costs,
//                        without a profiler.
//   ClusterMapCollector  metad: stripefs_server_state{server, address,
//                        domain, state} (1 for the server's state, 0 for the
//                        others), stripefs_cluster_servers{state},
//                        stripefs_cluster_map_epoch, and the volume's
//                        stripefs_volume_{inodes, bytes_used}.
//   ClientTableCollector metad: stripefs_clients{kind} (live clients that
//                        heartbeat metad: mounts, running repairs/scrubs)
//                        and stripefs_repair_stripes{kind, what} /
//                        stripefs_repair_bytes_rebuilt{kind} of running
//                        and last finished repairs (finished="0"/"1").
// The services are not owned and must outlive the MetricsServer. A failed
// read leaves its families out of that scrape (and counts it in
// stripefs_metrics_collect_errors_total).
#pragma once

#include "backend/chunk/chunk_service.h"
#include "backend/chunk/chunk_store.h"
#include "backend/meta/meta_service.h"
#include "backend/rpc/client_table.h"
#include "metrics/metrics_server.h"

namespace stripefs::metrics {

Collector ChunkStoreCollector(ChunkService* store, uint32_t server_id);
Collector ChunkEngineCollector(const ChunkStore* store, uint32_t server_id);
Collector ClusterMapCollector(MetaService* meta);
Collector ClientTableCollector(rpc::ClientTable* clients);

}  // namespace stripefs::metrics

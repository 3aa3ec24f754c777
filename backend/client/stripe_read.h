// StripeReader: the read path of a volume's erasure-coded stripes.
//
// Fetches only the needed columns of the needed data chunks and rebuilds
// lost ones on the fly from any k surviving chunks (server down, chunk
// missing, CRC error, or no answer within read_deadline: then other chunks
// are read in parallel and whichever completes first serves the read; the
// slow call is abandoned, never waited for). Readers only ever see
// committed versions; a version replaced (and collected) while being read
// is retried on the new one.
//
// Ownership: borrows everything it is given (owned by StripeClient).
// Thread-safety: all methods may be called concurrently.
#pragma once

#include <chrono>
#include <cstdint>
#include <span>
#include <vector>

#include "backend/client/client_counters.h"
#include "backend/client/cluster_view.h"
#include "backend/client/stripe_geometry.h"
#include "backend/client/thread_pool.h"
#include "backend/meta/meta_service.h"
#include "common/status.h"
#include "ec/codec.h"

namespace stripefs {

class StripeReader {
 public:
  struct Parts {
    MetaService* meta;
    const ec::Codec* codec;
    ClusterView* view;
    ThreadPool* pool;
    ClientCounters* counters;
  };
  StripeReader(const Parts& parts, StripeGeometry geometry,
               std::chrono::milliseconds read_deadline)
      : p_(parts), geo_(geometry), read_deadline_(read_deadline) {}

  // Reads min(out.size(), file_size - offset) bytes at `offset` (0 at or
  // past EOF); holes read as zeros. Returns the byte count.
  Result<size_t> Read(uint64_t ino, uint64_t offset, std::span<uint8_t> out,
                      uint64_t file_size);

  // Reads columns [lo, hi) of the chunk indices `want` of version `sv`
  // (out[j] for want[j]), reconstructing the ones that cannot be read from
  // k survivors. Used by the write path for read-modify-write.
  Status ReadColumns(uint64_t ino, const StripeVersion& sv,
                     const ChunkLayout& layout, const std::vector<int>& want,
                     uint32_t lo, uint32_t hi,
                     std::vector<std::vector<uint8_t>>* out);

 private:
  // Reads stripe bytes [a, b) of committed stripe `sv` into dst.
  Status ReadStripe(uint64_t ino, StripeVersion sv, uint64_t a, uint64_t b,
                    uint8_t* dst);

  const Parts p_;
  const StripeGeometry geo_;
  const std::chrono::milliseconds read_deadline_;
};

}  // namespace stripefs

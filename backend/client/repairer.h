// Repairer: walks a volume's stripe map and restores full redundancy.
//
//  * Repair: every stripe with chunks marked missing, or with a chunk whose
//    placement moved because a server was marked out, is rebuilt onto the
//    servers the current cluster map names (RepairStripe below). A chunk
//    whose server is down (or does not answer) cannot be rewritten until it
//    is back or marked out: its stripe stays degraded and is counted as
//    failed, never as done. Stripes degraded only by a chunk on a server the
//    map says is down are counted without being touched (the chunk is
//    intact there; its missing bit is not set).
//  * Scrub: every stripe is read whole, CRCs are checked by the stores and
//    parity is re-verified; bad chunks are rebuilt. Chunk versions that no
//    committed stripe references (orphans of crashed writes) are counted,
//    and deleted with delete_orphans — only safe while no client writes.
//
// Runs `parallel` stripes at a time. Ownership: borrows the Volume.
// Thread-safety: one Run() at a time per Repairer; the progress callback is
// called from worker threads under a mutex.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "backend/client/volume.h"

namespace stripefs {

struct RepairOptions {
  bool scrub = false;           // verify every stripe, not just degraded ones
  bool delete_orphans = false;  // scrub only
  int parallel = 4;
};

struct RepairProgress {
  uint64_t stripes_seen = 0;
  uint64_t stripes_total = 0;  // 0 until known
  uint64_t stripes_repaired = 0;
  uint64_t chunks_rebuilt = 0;
  uint64_t bytes_rebuilt = 0;
  // Left without full redundancy (see first_error), including:
  uint64_t stripes_failed = 0;
  // those whose only fault is chunks on servers that are down or do not
  // answer (nothing to rebuild them onto until they are back or out).
  uint64_t stripes_unreachable = 0;
  uint64_t orphan_chunks = 0;
  uint64_t orphans_deleted = 0;
  double seconds = 0;
  std::string first_error;
};

// Rebuilds the chunks of the committed stripe `sv` of `ino` that are
// missing (missing_mask, unreadable, or not on the server placement now
// names) onto the placement's servers, then clears the mask. With `verify`
// (scrub), every chunk is read whole and parity is re-checked; a chunk that
// passes its CRC but disagrees with parity is found and rebuilt. Returns the
// number of chunks rewritten; *unreachable (when given) gets the mask of the
// chunks left missing because their server is down or did not answer (the
// stripe's missing_mask keeps them). Holds the client's lock of that stripe.
Result<uint32_t> RepairStripe(StripeClient& client, uint64_t ino,
                              const StripeVersion& sv, bool verify,
                              uint32_t* unreachable = nullptr);

class Repairer {
 public:
  explicit Repairer(Volume* volume) : volume_(volume) {}
  // Returns the final tally; a non-OK status only when the walk itself
  // failed (metadata unreachable). Per-stripe failures are counted, and so
  // is every stripe left degraded (stripes_failed, stripes_unreachable).
  Result<RepairProgress> Run(
      const RepairOptions& options,
      const std::function<void(const RepairProgress&)>& progress = {});

 private:
  Status CountOrphans(const RepairOptions& options, RepairProgress* p);
  Volume* volume_;
};

}  // namespace stripefs

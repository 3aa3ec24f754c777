#include "fuse/engine_stats_json.h"

#include <sstream>

#include "fuse/request_parser.h"

namespace stripefs::fuse {

nlohmann::json NegotiatedToJson(const NegotiatedInit& n) {
  nlohmann::json j;
  j["kernel_protocol"] =
      std::to_string(n.kernel_major) + "." + std::to_string(n.kernel_minor);
  j["protocol_minor"] = n.minor;
  j["offered_flags"] = InitFlagNames(n.offered_flags);
  j["flags"] = InitFlagNames(n.flags);
  j["max_write"] = n.max_write;
  j["max_pages"] = n.max_pages;
  j["max_readahead"] = n.max_readahead;
  j["max_background"] = n.max_background;
  j["congestion_threshold"] = n.congestion_threshold;
  j["writeback_cache"] = n.writeback_cache();
  j["alignment"] = {{"requested", n.align_requested},
                    {"acknowledged", n.align_acknowledged},
                    {"align_page_order", n.align_page_order},
                    {"offset", n.align_offset}};
  j["compound"] = {{"offered", n.Offered(fuse_abi::FUSE_HAS_COMPOUND)},
                   {"agreed", n.Has(fuse_abi::FUSE_HAS_COMPOUND)}};
  j["io_uring"] = {{"offered", n.uring_offered},
                   {"requested", n.uring_requested}};
  return j;
}

nlohmann::json EngineStatsToJson(const EngineStats& s) {
  nlohmann::json j;
  j["initialized"] = s.initialized;
  j["negotiated"] = NegotiatedToJson(s.negotiated);
  j["transport"] = s.transport;
  j["uring_queues"] = s.uring_queues;
  j["uring_depth"] = s.uring_depth;
  j["uring_reads_inline"] = s.uring_reads_inline;
  j["uring_reads_handed"] = s.uring_reads_handed;
  j["uring_read_tries"] = s.uring_read_tries;
  j["uring_read_would_block"] = s.uring_read_would_block;
  nlohmann::json ops = nlohmann::json::object();
  for (uint32_t i = 0; i < s.per_opcode.size(); ++i) {
    if (s.per_opcode[i]) ops[std::string(OpcodeName(i))] = s.per_opcode[i];
  }
  j["requests_by_opcode"] = ops;
  j["unknown_opcode"] = s.unknown_opcode;
  j["malformed"] = s.malformed;
  j["interrupts"] = s.interrupts;
  j["reply_enoent"] = s.reply_enoent;
  j["dev_empty_wakes"] = s.dev_empty_wakes;
  j["dev_worker_sleeps"] = s.dev_worker_sleeps;
  j["dev_wait"] = s.dev_wait;
  nlohmann::json qs = nlohmann::json::array();
  for (const auto& q : s.queues) {
    qs.push_back({{"transport", q.transport},
                  {"queue", q.queue},
                  {"requests", q.requests},
                  {"foreground", q.foreground},
                  {"background", q.background},
                  {"per_cpu", q.per_cpu}});
  }
  j["queues"] = qs;
  return j;
}

std::string EngineStatsToText(const EngineStats& s) {
  std::ostringstream o;
  const NegotiatedInit& n = s.negotiated;
  o << "fuse protocol:   kernel " << n.kernel_major << "." << n.kernel_minor
    << ", using 7." << n.minor << "\n";
  o << "transport:       " << s.transport;
  if (s.transport == "uring")
    o << " (" << s.uring_queues << " queues x " << s.uring_depth
      << " entries; READs on queue threads / handed to workers: "
      << s.uring_reads_inline << " / " << s.uring_reads_handed
      << "; tried without blocking / given back: " << s.uring_read_tries
      << " / " << s.uring_read_would_block << ")";
  o << (n.uring_offered ? ", kernel offers io-uring"
                        : ", kernel does not offer io-uring")
    << "\n";
  o << "max_write:       " << n.max_write << " bytes, max_pages " << n.max_pages
    << "\n";
  o << "writeback cache: " << (n.writeback_cache() ? "on" : "off") << "\n";
  o << "alignment:       "
    << (n.align_requested
            ? "requested (2^" + std::to_string(n.align_page_order) +
                  " bytes), " +
                  (n.align_acknowledged ? "acknowledged" : "not acknowledged")
            : std::string("not requested"))
    << "\n";
  for (const auto& q : s.queues) {
    if (q.requests == 0) continue;
    o << "queue " << q.transport << "/" << q.queue << ": " << q.requests
      << " requests (" << q.foreground << " fg, " << q.background
      << " bg); per cpu:";
    for (size_t c = 0; c < q.per_cpu.size(); ++c)
      o << " " << c << "=" << q.per_cpu[c];
    o << "\n";
  }
  return o.str();
}

}  // namespace stripefs::fuse

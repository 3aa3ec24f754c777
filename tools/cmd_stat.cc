// `stripefs stat MNT [--json]`: the live counters of the daemon serving MNT
// (negotiated FUSE settings, WRITE shapes, coalescing, backend stripe
// writes, errors, per-queue requests), fetched over its stats socket.
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "fs/stats_socket.h"
#include "tools/command.h"

namespace stripefs::tools {
namespace {

using nlohmann::json;

std::string Num(const json& v) {
  if (v.is_number_float()) {
    char b[32];
    std::snprintf(b, sizeof(b), "%.1f", v.get<double>());
    return b;
  }
  if (v.is_boolean()) return v.get<bool>() ? "yes" : "no";
  if (v.is_string()) return v.get<std::string>();
  return v.dump();
}

void Row(const char* name, const std::string& value) {
  std::printf("  %-28s %s\n", name, value.c_str());
}

void Section(const char* title) { std::printf("%s\n", title); }

// The FUSE settings the kernel and daemon agreed on (if reported).
void PrintNegotiated(const json& j) {
  if (j.contains("negotiated")) {
    const json& n = j["negotiated"];
    Section("negotiated");
    Row("protocol", Num(n["protocol"]));
    Row("transport", Num(n["transport"]));
    Row("max_pages / max_write",
        Num(n["max_pages"]) + " / " + Num(n["max_write"]) + " B");
    Row("writeback cache", Num(n["writeback_cache"]));
    Row("alignment requested", Num(n["alignment_requested"]) + " (" +
                                   Num(n["alignment_bytes"]) + " B)");
    Row("alignment acknowledged", Num(n["alignment_acknowledged"]));
  }
}

// WRITE request shapes and READ totals.
void PrintRequests(const json& j) {
  const json& w = j["writes"];
  Section("WRITE requests (S = stripe size)");
  Row("total", Num(w["requests"]));
  Row("aligned (whole stripes)",
      Num(w["aligned"]) + " (" + Num(w["aligned_pct"]) + " %)");
  Row("start aligned", Num(w["start_aligned"]));
  Row("crossing a boundary", Num(w["crossing"]));
  Row("short (< max_write)", Num(w["short"]));
  Row("writeback", Num(w["writeback"]));
  Row("bytes / mean size", Num(w["bytes"]) + " / " + Num(w["mean_size"]));
  Row("READ requests / bytes",
      Num(j["reads"]["requests"]) + " / " + Num(j["reads"]["bytes"]));
}

// Stripe coalescing: buffers, full stripes, partial flushes.
void PrintCoalescing(const json& j) {
  const json& c = j["coalescing"];
  Section("coalescing");
  Row("enabled", Num(c["enabled"]));
  Row("buffered now",
      Num(c["buffered_bytes"]) + " B (cap " + Num(c["memory_cap"]) + " B)");
  if (c.contains("full_from_buffer")) {
    Row("full stripes from buffers", Num(c["full_from_buffer"]));
    Row("full stripes direct", Num(c["full_direct"]));
    Row("write-through (off)", Num(c["write_through"]));
    std::string pf;
    for (auto it = c["partial_flushes"].begin();
         it != c["partial_flushes"].end(); ++it) {
      if (it.value().get<uint64_t>() == 0) continue;
      pf += (pf.empty() ? "" : ", ") + it.key() + " " + Num(it.value());
    }
    Row("partial flushes", pf.empty() ? "0" : pf);
    Row("deferred / reported errors",
        Num(c["deferred_errors"]) + " / " + Num(c["reported_errors"]));
  }
}

// Backend stripe writes and chunk reads: kinds, degraded, errors.
void PrintBackend(const json& j) {
  const json& b = j["backend"];
  Section("backend stripe writes");
  Row("total", Num(b["stripe_writes"]));
  Row("full-stripe encodes",
      Num(b["full_stripe_writes"]) + " (" + Num(b["full_stripe_pct"]) + " %)");
  Row("new partial stripes", Num(b["new_partial_stripes"]));
  Row("RMW stripes / bytes read",
      Num(b["rmw_stripes"]) + " / " + Num(b["rmw_bytes_read"]));
  Row("parity-delta updates", Num(b["parity_delta_updates"]));
  Row("degraded writes / reads",
      Num(b["degraded_writes"]) + " / " + Num(b["degraded_reads"]));
  if (b.contains("degraded_queued")) {
    Row("degraded commits queued / repaired / still degraded",
        Num(b["degraded_queued"]) + " / " + Num(b["degraded_repaired"]) +
            " / " + Num(b["still_degraded"]));
    Row("degraded queue overflow / refused (ENOSPC)",
        Num(b["degraded_queue_overflow"]) + " / " + Num(b["degraded_refused"]));
  }
  Row("failed writes", Num(b["failed_writes"]));
  Row("chunk read / CRC errors",
      Num(b["chunk_read_errors"]) + " / " + Num(b["crc_errors"]));
  if (b.contains("slow_chunk_reads")) {
    Row("slow chunk reads / hedged / abandoned",
        Num(b["slow_chunk_reads"]) + " / " + Num(b["hedged_chunk_reads"]) +
            " / " + Num(b["abandoned_chunk_reads"]));
    Row("cluster map updates", Num(b["map_updates"]));
  }
}

// Metadata calls held through metad outages (if reported).
void PrintMetaHold(const json& j) {
  if (j.contains("meta_hold")) {
    Section("metad outages");
    const json& h = j["meta_hold"];
    Row("calls held / expired (EIO)",
        Num(h["held_calls"]) + " / " + Num(h["expired_calls"]));
    Row("failovers to another metad", Num(h["failovers"]));
  }
}

// Errors answered, by kind.
void PrintErrors(const json& j) {
  Section("errors by kind");
  if (!j.contains("errors") || j["errors"].empty())
    Row("(none)", "");
  else
    for (auto it = j["errors"].begin(); it != j["errors"].end(); ++it)
      Row(it.key().c_str(), Num(it.value()));
}

// Requests per transport queue (and io-uring READ handling).
void PrintQueues(const json& j) {
  if (j.contains("queues")) {
    Section("requests per queue");
    if (j.contains("engine") && j.contains("negotiated") &&
        Num(j["negotiated"]["transport"]) == "uring") {
      const json& e = j["engine"];
      Row("uring READs inline/workers",
          Num(e["uring_reads_inline"]) + " / " + Num(e["uring_reads_handed"]));
      if (e.contains("uring_read_tries")) {
        Row("uring READs tried/given back",
            Num(e["uring_read_tries"]) + " / " +
                Num(e["uring_read_would_block"]));
      }
    }
    for (const auto& q : j["queues"]) {
      Row((Num(q["transport"]) + " " + Num(q["queue"])).c_str(),
          Num(q["requests"]) + " (foreground " + Num(q["foreground"]) +
              ", background " + Num(q["background"]) + ")");
    }
  }
}

void PrintTable(const json& j) {
  const json& v = j["volume"];
  std::printf("stripefs %s at %s (pid %s)\n", Num(v["description"]).c_str(),
              Num(j["mountpoint"]).c_str(), Num(j["pid"]).c_str());
  Row("geometry", Num(v["k"]) + "+" + Num(v["m"]) + ", cell " +
                      Num(v["cell_size"]) + " B, stripe " +
                      Num(v["stripe_size"]) + " B");
  PrintNegotiated(j);
  PrintRequests(j);
  PrintCoalescing(j);
  PrintBackend(j);
  PrintMetaHold(j);
  PrintErrors(j);
  PrintQueues(j);
}

int RunStat(std::string mnt, bool as_json) {
  char abs[PATH_MAX];
  if (::realpath(mnt.c_str(), abs)) mnt = abs;
  std::string err;
  for (const auto& rp : fs::RuntimePathCandidates(mnt)) {
    auto doc = fs::FetchStats(rp.socket);
    if (!doc.ok()) {
      err += "\n  " + doc.status().ToString();
      continue;
    }
    json j = json::parse(*doc, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) {
      std::fprintf(stderr, "stripefs: the daemon sent malformed statistics\n");
      return 1;
    }
    if (as_json) {
      std::printf("%s\n", j.dump(2).c_str());
    } else {
      PrintTable(j);
    }
    return 0;
  }
  std::fprintf(
      stderr,
      "stripefs: no stripefs daemon answers for %s (is it mounted with "
      "`stripefs mount`?):%s\n",
      mnt.c_str(), err.c_str());
  return 1;
}

const CommandRegistration kRegister([](CLI::App& app) {
  auto* c = app.add_subcommand("stat", "live counters of a mounted stripefs");
  static std::string mnt;
  static bool as_json = false;
  c->add_option("MNT", mnt, "mountpoint")->required();
  c->add_flag("--json", as_json, "print JSON");
  c->callback([] { ExitWith(RunStat(mnt, as_json)); });
});

}  // namespace
}  // namespace stripefs::tools

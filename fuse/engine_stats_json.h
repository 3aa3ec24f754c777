// JSON rendering of EngineStats / NegotiatedInit for `stripefs stat --json`
// and a compact human text form. Pure functions; thread-safe.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "fuse/session_info.h"

namespace stripefs::fuse {

nlohmann::json NegotiatedToJson(const NegotiatedInit& n);
// Includes "negotiated", "transport", per-opcode counts (by name, non-zero
// only) and per-queue counters.
nlohmann::json EngineStatsToJson(const EngineStats& s);
// Multi-line human summary (negotiated settings, transport, queues).
std::string EngineStatsToText(const EngineStats& s);

}  // namespace stripefs::fuse

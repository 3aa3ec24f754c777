// VolumeFlags: the command-line options that name a volume, shared by every
// subcommand that opens one: an embedded volume directory (positional DIR)
// or a cluster (--meta HOST:PORT --key FILE). Single-threaded CLI use.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "backend/client/volume.h"

namespace stripefs::tools {

struct VolumeFlags {
  std::string dir;       // embedded volume directory
  std::string meta;      // cluster metadata service address
  std::string key_file;  // cluster key
  bool secure = false;   // encrypt RPC traffic (--secure)

  // Adds DIR (optional positional), --meta, --key and --secure to `cmd`.
  void AddTo(CLI::App* cmd);
  // Opens what the flags name; never creates an embedded volume.
  Result<std::unique_ptr<Volume>> Open(const StripeClientOptions& o = {}) const;
};

}  // namespace stripefs::tools

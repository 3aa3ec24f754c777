#include "tools/volume_flags.h"

namespace stripefs::tools {

void VolumeFlags::AddTo(CLI::App* cmd) {
  cmd->add_option("dir", dir, "embedded volume directory");
  cmd->add_option("--meta", meta, "cluster metadata service HOST:PORT");
  cmd->add_option("--key", key_file, "cluster key file (with --meta)");
  cmd->add_flag("--secure", secure,
                "encrypt RPC traffic, not just authenticate it (with --meta; "
                "needed when the servers run with --secure)");
}

Result<std::unique_ptr<Volume>> VolumeFlags::Open(
    const StripeClientOptions& o) const {
  if (!meta.empty()) {
    if (!dir.empty()) {
      return Status::InvalidArgument(
          "give either a volume directory or --meta, not both");
    }
    if (key_file.empty()) {
      return Status::InvalidArgument(
          "--meta needs --key FILE (the cluster key; `stripefs cluster up` "
          "writes it to DIR/cluster.key)");
    }
    StripeClientOptions co = o;
    co.secure_wire = co.secure_wire || secure;
    return Volume::ConnectCluster(meta, key_file, co);
  }
  if (dir.empty()) {
    return Status::InvalidArgument(
        "name a volume: an embedded volume directory, or --meta HOST:PORT "
        "--key FILE for a cluster");
  }
  EmbeddedVolumeOptions eo;
  eo.create_if_missing = false;
  eo.client = o;
  return Volume::OpenEmbedded(dir, eo);
}

}  // namespace stripefs::tools

// LocalVolume: a volume for unit tests, without processes: a MetaStore
// (sync off) and `servers` ChunkStores (no reserve) in a fresh temporary
// directory, server i registered in failure domain "host<i>". Each store is
// served through a wrapper the test makes (fault injection, hooks), the
// metadata optionally through one too (counting). The destructor closes the
// volume, then the stores, and removes the directory. Header-only (users
// link the client library).
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/chunk/chunk_store.h"
#include "backend/client/volume.h"
#include "backend/meta/meta_store.h"

namespace stripefs::testing {

struct LocalVolume {
  using ChunkWrapper =
      std::function<std::unique_ptr<ChunkService>(ChunkStore*)>;
  using MetaWrapper =
      std::function<std::unique_ptr<MetaService>(std::unique_ptr<MetaService>)>;

  static Result<std::unique_ptr<LocalVolume>> Create(
      int servers, const Geometry& g, const ChunkWrapper& wrap,
      const MetaWrapper& wrap_meta = nullptr,
      const StripeClientOptions& options = {}) {
    auto lv = std::make_unique<LocalVolume>();
    char tmpl[] = "/tmp/stripefs-volume-XXXXXX";
    if (!::mkdtemp(tmpl)) return Status::FromErrno(errno, "mkdtemp");
    lv->dir = tmpl;
    MetaStoreOptions mo;
    mo.sync = false;
    auto meta = MetaStore::Create(lv->dir + "/meta", g, mo);
    if (!meta.ok()) return meta.status();
    std::vector<std::unique_ptr<ChunkService>> wrappers;
    for (int i = 0; i < servers; ++i) {
      ChunkStoreOptions co;
      co.reserve_bytes = 0;
      auto store =
          ChunkStore::Open(lv->dir + "/chunks" + std::to_string(i), co);
      if (!store.ok()) return store.status();
      wrappers.push_back(wrap(store->get()));
      lv->stores.push_back(std::move(store).value());
      ServerInfo info;
      info.id = static_cast<uint32_t>(i);
      info.failure_domain = "host" + std::to_string(i);
      STRIPEFS_RETURN_IF_ERROR((*meta)->UpsertServer(info));
    }
    std::unique_ptr<MetaService> m = std::move(meta).value();
    if (wrap_meta) m = wrap_meta(std::move(m));
    auto v = Volume::FromParts(
        std::move(m), std::make_unique<LocalChunkServers>(std::move(wrappers)),
        options);
    if (!v.ok()) return v.status();
    lv->volume = std::move(v).value();
    return lv;
  }

  ~LocalVolume() {
    volume.reset();
    stores.clear();
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }

  std::string dir;
  std::vector<std::unique_ptr<ChunkStore>> stores;  // outlive volume
  std::unique_ptr<Volume> volume;
};

}  // namespace stripefs::testing

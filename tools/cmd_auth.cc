// `stripefs auth add|ls|rm`: metad's identity table (docs/cluster.md
// "Identities"), run with the server key or an admin identity:
//   auth add client.NAME --out FILE [--path /sub] [--read-only]
//   auth ls
//   auth rm client.NAME
// `add` writes the new identity's key file (0600; its key crossed the wire
// wrapped under the caller's key); `rm` takes effect at once: the identity's
// next request and handshake are refused. Single-threaded.
#include <cstdio>
#include <memory>
#include <string>

#include "backend/rpc/cluster_key.h"
#include "backend/rpc/remote_meta_service.h"
#include "tools/command.h"

namespace stripefs::tools {
namespace {

struct AuthFlags {
  std::string meta;
  std::string key;
  std::string entity;
  std::string out;
  std::string path = "/";
  bool read_only = false;
  bool secure = false;  // encrypt the connection (metad runs --secure)
};

int Fail(const std::string& what, const Status& s) {
  std::fprintf(stderr, "stripefs auth: %s: %s\n", what.c_str(),
               s.ToString().c_str());
  return 1;
}

Result<std::unique_ptr<rpc::RemoteMetaService>> Connect(const AuthFlags& f) {
  if (f.meta.empty())
    return Status::InvalidArgument(
        "auth needs --meta HOST:PORT (metad) and --key FILE (the server key "
        "or an admin identity)");
  STRIPEFS_ASSIGN_OR_RETURN(auto key, rpc::ClusterKey::Load(f.key));
  if (f.secure) key = key->WithSecureWire(true);
  return std::make_unique<rpc::RemoteMetaService>(f.meta, key);
}

int RunAdd(const AuthFlags& f) {
  if (f.out.empty())
    return Fail("add", Status::InvalidArgument(
                           "--out FILE is required (the new identity's key "
                           "file, written 0600)"));
  auto meta = Connect(f);
  if (!meta.ok()) return Fail("add", meta.status());
  rpc::IdentityRecord r{f.entity, f.path, f.read_only};
  auto id = (*meta)->AuthAdd(r);
  if (!id.ok()) return Fail("add " + f.entity, id.status());
  if (Status s = id->SaveIdentity(f.out); !s.ok()) {
    // Not usable without its file: take the row back out.
    (void)(*meta)->AuthRemove(f.entity);
    return Fail("add " + f.entity, s);
  }
  std::printf("added %s (path %s%s); key file %s\n", f.entity.c_str(),
              f.path.c_str(), f.read_only ? ", read-only" : "", f.out.c_str());
  return 0;
}

int RunList(const AuthFlags& f) {
  auto meta = Connect(f);
  if (!meta.ok()) return Fail("ls", meta.status());
  auto rows = (*meta)->AuthList();
  if (!rows.ok()) return Fail("ls", rows.status());
  std::printf("%-40s %-10s %s\n", "IDENTITY", "ACCESS", "PATH");
  for (const rpc::IdentityRecord& r : *rows) {
    bool admin = r.entity.starts_with("admin.");
    std::printf("%-40s %-10s %s\n", r.entity.c_str(),
                admin ? "admin" : (r.read_only ? "read" : "read-write"),
                r.path.c_str());
  }
  return 0;
}

int RunRemove(const AuthFlags& f) {
  auto meta = Connect(f);
  if (!meta.ok()) return Fail("rm", meta.status());
  if (Status s = (*meta)->AuthRemove(f.entity); !s.ok())
    return Fail("rm " + f.entity, s);
  std::printf("removed %s: its sessions are refused from now on\n",
              f.entity.c_str());
  return 0;
}

CommandRegistration auth_commands([](CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "auth", "manage admin and client identities on metad (add, ls, rm)");
  cmd->require_subcommand(1);
  auto f = std::make_shared<AuthFlags>();
  auto common = [f](CLI::App* c) {
    c->add_option("--meta", f->meta, "metad HOST:PORT")->required();
    c->add_option("--key", f->key, "the server key or an admin identity file")
        ->required();
    c->add_flag("--secure", f->secure,
                "encrypt RPC traffic, not just authenticate it (needed when "
                "metad runs with --secure)");
  };
  auto* add = cmd->add_subcommand(
      "add", "add an identity and write its key file (--out)");
  add->add_option("entity", f->entity, "client.NAME or admin.NAME")->required();
  add->add_option("--out", f->out, "key file to write (mode 0600)");
  add->add_option("--path", f->path,
                  "subtree the client is given: metad refuses every inode outside it");
  add->add_flag("--read-only", f->read_only,
                "the client may only read (metad refuses every change)");
  common(add);
  add->callback([f] { ExitWith(RunAdd(*f)); });
  auto* ls = cmd->add_subcommand("ls", "list the identities");
  common(ls);
  ls->callback([f] { ExitWith(RunList(*f)); });
  auto* rm = cmd->add_subcommand(
      "rm", "remove an identity (its sessions are refused at once)");
  rm->add_option("entity", f->entity, "client.NAME or admin.NAME")->required();
  common(rm);
  rm->callback([f] { ExitWith(RunRemove(*f)); });
});

}  // namespace
}  // namespace stripefs::tools

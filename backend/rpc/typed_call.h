// Typed helpers over RpcClient / RpcServer for the messages of
// wire_messages.h: CallTyped / CallTypedInto (client side: encode request,
// call, decode the remote Status and results through DecodeTypedResponse)
// and ServeTyped (server side: decode request, run the service method, encode
// its Status and results). Used by the Remote*Service stubs and the
// *ServiceServer handlers. Stateless.
#pragma once

#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "backend/rpc/chunk_grant.h"
#include "backend/rpc/rpc_client.h"
#include "backend/rpc/rpc_server.h"
#include "backend/rpc/wire_messages.h"

namespace stripefs::rpc {

// Decodes a typed response payload from `client`'s peer: EPROTO (naming the
// message, peer role and address) when the payload is malformed, the remote
// Status when it is an error, else OK with *resp filled. The one response
// decoder behind CallTyped and CallTypedInto.
template <MsgType T>
Status DecodeTypedResponse(const RpcClient& client,
                           std::span<const uint8_t> payload,
                           typename Msg<T>::Response* resp) {
  Status remote;
  if (!DecodeResponse<T>(payload, &remote, resp)) {
    return Status(EPROTO, std::string("malformed ") +
                              MsgTypeName(static_cast<uint16_t>(T)) +
                              " response from " + client.options().peer_role +
                              " at " + client.address() +
                              " (different stripefs versions?)");
  }
  return remote;
}

// The request payload of T, sent as itself or, with a grant head
// (chunk_grant.h: EncodeGrantedHead), as a GrantedCall around it: the
// message type to send and its payload.
template <MsgType T>
std::pair<uint16_t, std::vector<uint8_t>> TypedRequest(
    const typename Msg<T>::Request& req, std::span<const uint8_t> head) {
  if (head.empty()) return {static_cast<uint16_t>(T), EncodeRequest<T>(req)};
  std::vector<uint8_t> payload(head.begin(), head.end());
  Encoder e(&payload);
  PutTuple(e, req);
  return {kGrantedCallType, std::move(payload)};
}

// CallTypedGather with optional response bulk: the one body of both.
// `head`: non-empty sends the request as a GrantedCall (TypedRequest).
template <MsgType T>
Status CallTypedParts(RpcClient& client, const typename Msg<T>::Request& req,
                      typename Msg<T>::Response* resp, BulkParts bulk_out,
                      AlignedBytes* bulk_in, std::chrono::milliseconds timeout,
                      std::span<const uint8_t> head = {}) {
  auto [type, payload] = TypedRequest<T>(req, head);
  STRIPEFS_ASSIGN_OR_RETURN(
      RpcResponse r, client.CallGather(type, payload, bulk_out, timeout));
  STRIPEFS_RETURN_IF_ERROR(DecodeTypedResponse<T>(client, r.payload, resp));
  if (bulk_in) *bulk_in = std::move(r.bulk);
  return Status::Ok();
}

// Returns the transport error, the remote Status, or OK with *resp filled
// (and *bulk_in holding the response bulk when requested). `timeout` > 0
// overrides the client's call timeout for this call.
template <MsgType T>
Status CallTyped(RpcClient& client, const typename Msg<T>::Request& req,
                 typename Msg<T>::Response* resp,
                 std::span<const uint8_t> bulk_out = {},
                 AlignedBytes* bulk_in = nullptr,
                 std::chrono::milliseconds timeout = {},
                 std::span<const uint8_t> head = {}) {
  return CallTypedParts<T>(client, req, resp, BulkParts(&bulk_out, 1), bulk_in,
                           timeout, head);
}

// CallTyped whose request bulk is the concatenation of `bulk_out`'s
// buffers, sent from where they are (a batch of chunk ops: no copy of
// their bytes into one buffer).
template <MsgType T>
Status CallTypedGather(RpcClient& client, const typename Msg<T>::Request& req,
                       typename Msg<T>::Response* resp, BulkParts bulk_out,
                       std::span<const uint8_t> head = {}) {
  return CallTypedParts<T>(client, req, resp, bulk_out, nullptr, {}, head);
}

// CallTyped whose response bulk must be exactly `bulk_in.size()` bytes and
// is received straight into it (RpcClient::CallInto), by `deadline`. A
// response with another bulk length is EPROTO.
template <MsgType T>
Status CallTypedInto(RpcClient& client, const typename Msg<T>::Request& req,
                     typename Msg<T>::Response* resp,
                     std::span<uint8_t> bulk_in, Deadline deadline,
                     std::span<const uint8_t> head = {}) {
  // The payload of a good reply, when it has no results: an OK status.
  static const size_t ok_payload =
      std::tuple_size_v<typename Msg<T>::Response> == 0
          ? EncodeResponse<T>(Status::Ok(), {}).size()
          : SIZE_MAX;
  auto [type, payload] = TypedRequest<T>(req, head);
  STRIPEFS_ASSIGN_OR_RETURN(
      RpcResponse r,
      client.CallInto(type, payload, bulk_in, deadline, ok_payload));
  STRIPEFS_RETURN_IF_ERROR(DecodeTypedResponse<T>(client, r.payload, resp));
  if (!r.bulk_in_place) {
    return Status(EPROTO, client.options().peer_role + " at " +
                              client.address() + " returned " +
                              std::to_string(r.bulk.size()) + " bytes for a " +
                              std::to_string(bulk_in.size()) + "-byte " +
                              MsgTypeName(static_cast<uint16_t>(T)));
  }
  return Status::Ok();
}

// fn(Response& out, RequestFields&...) -> Status.
template <MsgType T, typename F>
void ServeTyped(std::span<const uint8_t> payload, RpcReply* reply, F&& fn) {
  typename Msg<T>::Request req{};
  typename Msg<T>::Response resp{};
  Status st;
  if (!DecodeRequest<T>(payload, &req)) {
    st = Status(EPROTO, std::string("malformed ") +
                            MsgTypeName(static_cast<uint16_t>(T)) +
                            " request (different stripefs versions?)");
  } else {
    st = std::apply([&](auto&... a) { return fn(resp, a...); }, req);
  }
  reply->payload = EncodeResponse<T>(st, resp);
}

// An error-only response (valid for every message type).
inline std::vector<uint8_t> EncodeErrorResponse(const Status& s) {
  std::vector<uint8_t> out;
  Encoder e(&out);
  PutStatus(e, s);
  return out;
}

}  // namespace stripefs::rpc

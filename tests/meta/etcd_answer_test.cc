// How the etcd engine classifies etcd's answers (built with the engine only).
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "backend/meta/etcd_grpc.h"

namespace stripefs {
namespace {

// A request whose deadline ran out inside etcd comes back as the Go context
// error under UNKNOWN; as a final error it failed a held namespace change at
// once with EIO during a quorum loss (EtcdClusterTest.QuorumLoss...).
TEST(EtcdAnswerTest, DeadlineExceededInsideEtcdIsRetryable) {
  EXPECT_TRUE(EtcdRetryable(
      grpc::Status(grpc::StatusCode::UNKNOWN, "context deadline exceeded")));
  EXPECT_TRUE(EtcdRetryable(
      grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "Deadline Exceeded")));
  EXPECT_TRUE(EtcdRetryable(
      grpc::Status(grpc::StatusCode::UNAVAILABLE, "etcdserver: no leader")));
  EXPECT_TRUE(EtcdRetryable(grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                         "etcdserver: request timed out")));
}

TEST(EtcdAnswerTest, RefusalsAndOtherErrorsAreFinal) {
  EXPECT_FALSE(EtcdRetryable(grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                                          "etcdserver: permission denied")));
  EXPECT_FALSE(EtcdRetryable(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                          "etcdserver: too many operations")));
  EXPECT_FALSE(EtcdRetryable(
      grpc::Status(grpc::StatusCode::UNKNOWN, "something else broke")));
  EXPECT_FALSE(EtcdRetryable(grpc::Status::OK));
}

}  // namespace
}  // namespace stripefs

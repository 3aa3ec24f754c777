// ParseExposition on what prometheus-cpp writes and on bad input, and the
// mapping of a `stripefs stat` document to metric families.
#include <gtest/gtest.h>
#include <prometheus/text_serializer.h>

#include "metrics/mount_metrics.h"
#include "metrics/scrape.h"

namespace stripefs::metrics {
namespace {

TEST(ExpositionTest, ParsesSamplesLabelsAndSums) {
  auto e = ParseExposition(
      "# HELP a_total x\n# TYPE a_total counter\n"
      "a_total{role=\"chunkd\",op=\"Write Chunk\"} 3\n"
      "a_total{role=\"metad\"} 4.5\nb 7 1700000000\n");
  EXPECT_EQ(e.bad_lines, 0u);
  EXPECT_DOUBLE_EQ(e.Sum("a_total"), 7.5);
  EXPECT_DOUBLE_EQ(e.Sum("b"), 7);
  EXPECT_TRUE(e.Has("b"));
  EXPECT_FALSE(e.Has("a"));  // a prefix of a name is not the name
}

TEST(ExpositionTest, SkipsAndCountsBadLines) {
  auto e = ParseExposition("novalue\nx{a=\"1\" 3\ny abc\n z\n{} 1\nok 1");
  EXPECT_EQ(e.series.size(), 1u);
  EXPECT_EQ(e.bad_lines, 5u);
  EXPECT_TRUE(e.Has("ok"));
}

TEST(MountStatsMappingTest, CountersGaugesAndLabeledMaps) {
  nlohmann::json stats = {
      {"volume", {{"k", 4}, {"description", "cluster"}}},
      {"writes", {{"requests", 10}, {"aligned_pct", 50.0}}},
      {"errors", {{"ENOENT", 3}}},
      {"requests_by_opcode", {{"WRITE", 10}, {"LOOKUP", 2}}},
      {"coalescing", {{"enabled", true}, {"partial_flushes", {{"fsync", 1}}}}},
      {"queues",
       {{{"transport", "dev"},
         {"queue", 0},
         {"requests", 12},
         {"foreground", 2},
         {"background", 10}}}}};
  Families f;
  AppendStatsFamilies(stats, &f);
  auto text = prometheus::TextSerializer().Serialize(f);
  auto e = ParseExposition(text);
  EXPECT_EQ(e.bad_lines, 0u) << text;
  EXPECT_DOUBLE_EQ(e.Sum("stripefs_mount_volume_k"), 4);
  EXPECT_DOUBLE_EQ(e.Sum("stripefs_mount_writes_requests_total"), 10);
  EXPECT_DOUBLE_EQ(e.Sum("stripefs_mount_writes_aligned_pct"), 50);
  EXPECT_DOUBLE_EQ(e.series["stripefs_mount_errors_total{errno=\"ENOENT\"}"],
                   3);
  EXPECT_DOUBLE_EQ(e.series["stripefs_fuse_requests_total{op=\"WRITE\"}"], 10);
  EXPECT_DOUBLE_EQ(e.Sum("stripefs_mount_coalescing_enabled"), 1);
  EXPECT_DOUBLE_EQ(e.Sum("stripefs_mount_coalescing_partial_flushes_total"), 1);
  EXPECT_DOUBLE_EQ(e.series["stripefs_fuse_queue_background_total{queue=\"0\","
                            "transport=\"dev\"}"],
                   10);
  EXPECT_NE(text.find("# TYPE stripefs_mount_writes_requests_total counter"),
            std::string::npos);
  EXPECT_NE(text.find("# TYPE stripefs_mount_volume_k gauge"),
            std::string::npos);
}

}  // namespace
}  // namespace stripefs::metrics

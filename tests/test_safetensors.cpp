// The safetensors reader must accept good files and reject every kind of broken one with a
// message that names the problem, never crash or read out of bounds.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>

#include "core/error.h"
#include "core/model/safetensors.h"
#include "tests/test_util.h"

namespace attnviz {
namespace {

// A file with the given JSON header and `data_bytes` of data.
std::string make_file(const std::string& header, size_t data_bytes, size_t declared_len = SIZE_MAX) {
  std::string s;
  const uint64_t n = declared_len == SIZE_MAX ? header.size() : declared_len;
  for (int i = 0; i < 8; ++i) s.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  s += header;
  s.append(data_bytes, '\0');
  return s;
}

// Expects open() to fail with a message containing `needle`.
void expect_rejected(const std::string& bytes, const std::string& needle) {
  const std::string path = test::temp_dir("st") + "/bad.safetensors";
  test::write_bytes(path, bytes);
  try {
    SafetensorsFile::open(path);
    FAIL() << "accepted a broken file; expected an error mentioning '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << "message should name the file: " << e.what();
  }
}

TEST(Safetensors, RoundTripKeepsValuesShapesAndMetadata) {
  const std::string path = test::temp_dir("st") + "/ok.safetensors";
  const float a[6] = {1.5f, -2.f, 0.f, -INFINITY, 3.25f, 1e-20f};
  const int32_t b[3] = {7, -1, 2147483647};
  SafetensorsWriter w;
  w.add_f32("a", {2, 3}, a);
  w.add_i32("b", {3}, b);
  w.set_metadata("k", "v");
  w.write(path);
  const auto f = SafetensorsFile::open(path);
  ASSERT_NE(f.find("a"), nullptr);
  EXPECT_EQ(f.find("a")->shape, (std::vector<int64_t>{2, 3}));
  const auto av = f.read_f32(*f.find("a"));
  for (int i = 0; i < 6; ++i) EXPECT_EQ(av[i], a[i]);
  const auto bv = f.read_i32(*f.find("b"));
  EXPECT_EQ(bv, (std::vector<int32_t>{7, -1, 2147483647}));
  EXPECT_EQ(f.metadata().at("k"), "v");
  EXPECT_EQ(f.find("missing"), nullptr);
}

TEST(Safetensors, BorrowedAndGeneratedTensorsWriteTheSameBytesAsCopiedOnes) {
  const std::string dir = test::temp_dir("st");
  const float a[6] = {1.5f, -2.f, 0.f, -INFINITY, 3.25f, 1e-20f};
  SafetensorsWriter copied, lazy;
  copied.add_f32("a", {2, 3}, a);
  copied.add_f32("g", {3, 2}, a);
  lazy.add_f32_ref("a", {2, 3}, a);
  std::vector<int64_t> asked;
  lazy.add_f32_generated("g", {3, 2}, [&](int64_t i, float* dst) {  // slice i = 2 values
    asked.push_back(i);
    dst[0] = a[2 * i], dst[1] = a[2 * i + 1];
  });
  copied.write(dir + "/copied.safetensors");
  lazy.write(dir + "/lazy.safetensors");
  EXPECT_EQ(asked, (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(test::read_file(dir + "/lazy.safetensors"), test::read_file(dir + "/copied.safetensors"));
  // A generator that fails leaves no file behind.
  SafetensorsWriter bad;
  bad.add_f32_generated("g", {2, 1}, [](int64_t, float*) { throw Error("no"); });
  EXPECT_THROW(bad.write(dir + "/bad.safetensors"), Error);
  EXPECT_FALSE(std::ifstream(dir + "/bad.safetensors").good());
  EXPECT_FALSE(std::ifstream(dir + "/bad.safetensors.tmp-attnviz").good());
}

TEST(Safetensors, ConvertsF16AndBF16) {
  // F16 0x3C00 = 1, 0xC000 = -2, 0x0001 = 2^-24, 0x7C00 = inf; BF16 0x3FC0 = 1.5, 0xC040 = -3
  const uint16_t h[4] = {0x3C00, 0xC000, 0x0001, 0x7C00};
  const uint16_t bf[2] = {0x3FC0, 0xC040};
  std::string hdr = R"({"h":{"dtype":"F16","shape":[4],"data_offsets":[0,8]},"b":{"dtype":"BF16","shape":[2],"data_offsets":[8,12]}})";
  std::string bytes = make_file(hdr, 0);
  bytes.append(reinterpret_cast<const char*>(h), 8);
  bytes.append(reinterpret_cast<const char*>(bf), 4);
  const std::string path = test::temp_dir("st") + "/half.safetensors";
  test::write_bytes(path, bytes);
  const auto f = SafetensorsFile::open(path);
  const auto hv = f.read_f32(*f.find("h"));
  EXPECT_EQ(hv[0], 1.f);
  EXPECT_EQ(hv[1], -2.f);
  EXPECT_EQ(hv[2], std::ldexp(1.f, -24));
  EXPECT_TRUE(std::isinf(hv[3]));
  const auto bv = f.read_f32(*f.find("b"));
  EXPECT_EQ(bv[0], 1.5f);
  EXPECT_EQ(bv[1], -3.f);
}

TEST(Safetensors, RejectsFileShorterThanLengthField) { expect_rejected(std::string("\x05\x00\x00", 3), "truncated"); }

TEST(Safetensors, RejectsHeaderLengthPastEndOfFile) {
  expect_rejected(make_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 4, 100000), "runs past the end");
}

TEST(Safetensors, RejectsTruncatedData) {
  // declares 4 floats, holds only 8 bytes of data
  expect_rejected(make_file(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 8), "run past the data buffer");
}

TEST(Safetensors, RejectsOffsetsBeyondFile) {
  expect_rejected(make_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[1000,1004]}})", 8), "run past the data buffer");
}

TEST(Safetensors, RejectsOverlappingTensors) {
  expect_rejected(make_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", 12),
                  "overlap");
}

TEST(Safetensors, RejectsShapeThatDisagreesWithOffsets) {
  expect_rejected(make_file(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8), "needs 12 bytes");
}

TEST(Safetensors, RejectsUnknownDtype) {
  expect_rejected(make_file(R"({"a":{"dtype":"F8_E4M3X","shape":[1],"data_offsets":[0,1]}})", 1), "unknown dtype");
}

TEST(Safetensors, RejectsHeaderThatIsNotJson) { expect_rejected(make_file("{not json", 0), "not valid JSON"); }

TEST(Safetensors, RejectsBeginAfterEnd) {
  expect_rejected(make_file(R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[8,4]}})", 8), "begin > end");
}

TEST(Safetensors, MissingFileIsAClearError) {
  try {
    SafetensorsFile::open("/nonexistent/x.safetensors");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot open '/nonexistent/x.safetensors'"), std::string::npos);
  }
}

TEST(Safetensors, WriteToUnwritablePathFailsAndLeavesNothing) {
  SafetensorsWriter w;
  const float x = 1;
  w.add_f32("x", {1}, &x);
  EXPECT_THROW(w.write("/nonexistent-dir/out.safetensors"), Error);
}

}  // namespace
}  // namespace attnviz

// The C ABI's means to grow (zero_engine.h): the version query, the size
// every caller-filled struct starts with, named status codes; and the model
// state formula it exposes (zero_model_state_bytes) with its refusals.
#include <cmath>
#include <limits>
#include <cstddef>
#include <string>

#include <unistd.h>

#include "gtest/gtest.h"
#include "zero/capi/zero_engine.h"
#include "zero/model_state_formula.h"

namespace {

constexpr char kConfig[] =
    R"({"stage": 1, "optimizer": {"type": "adamw", "groups": [{"lr": 0.01}]}})";

std::string LastError() { return zero_engine_last_error(); }

TEST(CapiAbi, TheLibraryIsTheHeadersVersion) {
  int major = -1, minor = -1;
  ASSERT_EQ(zero_engine_abi_version(&major, &minor), ZERO_OK);
  EXPECT_EQ(major, ZERO_ABI_VERSION_MAJOR);
  EXPECT_EQ(minor, ZERO_ABI_VERSION_MINOR);
  EXPECT_EQ(zero_engine_abi_version(nullptr, &minor), ZERO_INVALID_ARGUMENT);
  EXPECT_NE(LastError().find("major is null"), std::string::npos) << LastError();
}

// A caller built against another header: its struct's size differs (or it
// never set it). The error names the struct and both sizes; nothing is made.
TEST(CapiAbi, CollectivesOfAnotherSizeAreRefused) {
  // The size is checked first: nothing else of the struct is read.
  zero_collectives fns{};
  for (size_t size : {sizeof fns - 2 * sizeof(void*), sizeof fns + 8, size_t{0}}) {
    fns.size = size;
    zero_comm_t comm = reinterpret_cast<zero_comm_t>(&fns);
    EXPECT_EQ(zero_comm_create(&comm, 0, 1, &fns), ZERO_INVALID_ARGUMENT);
    EXPECT_EQ(comm, nullptr);
    const std::string expected = "zero_collectives.size is " + std::to_string(size) +
                                 ", but this library's zero_collectives is " +
                                 std::to_string(sizeof fns) + " bytes";
    EXPECT_NE(LastError().find(expected), std::string::npos) << LastError();
  }
}

// ABI 1.2's struct ended before all_to_all: its size is still taken (the
// missing collectives are then what is refused, not the size).
TEST(CapiAbi, CollectivesOfAbiOneTwoAreTaken) {
  zero_collectives fns{};
  fns.size = offsetof(zero_collectives, all_to_all);
  zero_comm_t comm = nullptr;
  EXPECT_EQ(zero_comm_create(&comm, 0, 1, &fns), ZERO_INVALID_ARGUMENT);
  EXPECT_EQ(LastError().find("zero_collectives.size"), std::string::npos) << LastError();
  EXPECT_NE(LastError().find("every collective"), std::string::npos) << LastError();
}

// zero_comm_create_hierarchical refuses what cannot compose, leaving both
// handles whole; once it took them, they are refused as engines' comms.
TEST(CapiAbi, HierarchicalCommunicatorChecksItsParts) {
  zero_devices_t devices = nullptr;
  ASSERT_EQ(zero_devices_create(&devices, "host:4x64MiB"), ZERO_OK);
  zero_comm_t intra[2] = {}, inter[2] = {};
  ASSERT_EQ(zero_comm_create_local(intra, 2, 5.0, devices), ZERO_OK);
  ASSERT_EQ(zero_comm_create_local(inter, 2, 5.0, devices), ZERO_OK);
  zero_comm_t made = nullptr;
  EXPECT_EQ(zero_comm_create_hierarchical(&made, 0, 2, nullptr, inter[0], devices, 0),
            ZERO_INVALID_ARGUMENT);
  EXPECT_NE(LastError().find("intra"), std::string::npos) << LastError();
  EXPECT_EQ(zero_comm_create_hierarchical(&made, 0, 2, intra[0], inter[0], devices, 9),
            ZERO_INVALID_ARGUMENT);
  EXPECT_NE(LastError().find("device 9 of 4"), std::string::npos) << LastError();
  // Rank 1 is local rank 1 of node 0: intra[0] (local rank 0) does not fit.
  EXPECT_EQ(zero_comm_create_hierarchical(&made, 1, 2, intra[0], inter[0], devices, 0),
            ZERO_INVALID_ARGUMENT);
  EXPECT_NE(LastError().find("intra is rank 0 of 2"), std::string::npos) << LastError();
  EXPECT_EQ(made, nullptr);
  ASSERT_EQ(zero_comm_create_hierarchical(&made, 0, 2, intra[0], inter[0], devices, 0), ZERO_OK);
  zero_comm_t again = nullptr;  // not `made`: a failed call nulls its output
  EXPECT_EQ(zero_comm_create_hierarchical(&again, 0, 2, intra[0], inter[0], devices, 0),
            ZERO_FAILED_PRECONDITION);
  EXPECT_EQ(again, nullptr);
  EXPECT_NE(LastError().find("already used"), std::string::npos) << LastError();
  zero_engine_t engine = nullptr;
  const zero_param_spec spec = {sizeof(zero_param_spec), "w", 8, 0, 0};
  EXPECT_EQ(zero_engine_create(&engine, R"({"optimizer":{"type":"sgd","groups":[{}]}})", &spec,
                               1, intra[0], devices, 0),
            ZERO_FAILED_PRECONDITION);
  EXPECT_NE(LastError().find("emptied into a hierarchical"), std::string::npos) << LastError();
  for (zero_comm_t c : {made, intra[0], intra[1], inter[0], inter[1]}) zero_comm_destroy(c);
  zero_devices_destroy(devices);
}

TEST(CapiAbi, NodeRangeFunctionsWorkAloneAndRefuseBadInput) {
  zero_devices_t node = nullptr;
  for (const char* spec : {"meta:1x64MiB", "host:2x64MiB", "host:nonsense"}) {
    EXPECT_EQ(zero_devices_create_node(&node, spec, 0, 1, "capi-bad", 5.0),
              ZERO_INVALID_ARGUMENT)
        << spec;
  }
  EXPECT_NE(LastError().find("host:nonsense"), std::string::npos) << LastError();
  EXPECT_EQ(zero_devices_create_node(&node, "host:1x64MiB", 0, 1, nullptr, 5.0),
            ZERO_INVALID_ARGUMENT);
  EXPECT_EQ(zero_devices_create_node(&node, "host:1x64MiB", 0, 1, "capi-bad", 0.0),
            ZERO_INVALID_ARGUMENT);
  EXPECT_NE(LastError().find("timeout"), std::string::npos) << LastError();
  EXPECT_EQ(zero_devices_create_node(&node, "host:1x64MiB", 1, 1, "capi-bad", 5.0),
            ZERO_INVALID_ARGUMENT);  // local rank 1 of 1
  EXPECT_EQ(node, nullptr);

  // Devices made otherwise have no range.
  zero_devices_t plain = nullptr;
  ASSERT_EQ(zero_devices_create(&plain, "host:1x64MiB"), ZERO_OK);
  zero_comm_t comm = nullptr;
  EXPECT_EQ(zero_comm_create_node(&comm, plain, 5.0), ZERO_FAILED_PRECONDITION);
  EXPECT_NE(LastError().find("zero_devices_create_node"), std::string::npos) << LastError();
  char text[512];
  size_t needed = 0;
  EXPECT_EQ(zero_devices_node_info(plain, text, sizeof(text), &needed), ZERO_FAILED_PRECONDITION);
  void* p = nullptr;
  EXPECT_EQ(zero_devices_allocate(plain, 3, 64, &p), ZERO_INVALID_ARGUMENT);
  EXPECT_NE(LastError().find("device 3 of 1"), std::string::npos) << LastError();
  EXPECT_EQ(zero_devices_allocate(plain, 0, 0, &p), ZERO_INVALID_ARGUMENT);  // zero bytes
  EXPECT_EQ(zero_devices_free(plain, -1, nullptr, 64), ZERO_INVALID_ARGUMENT);
  zero_devices_destroy(plain);

  // A range of one process: it joins alone, and its collectives are copies.
  const std::string key = "capi-alone-" + std::to_string(::getpid());
  ASSERT_EQ(zero_devices_create_node(&node, "host:1x64MiB", 0, 1, key.c_str(), 5.0), ZERO_OK)
      << LastError();
  ASSERT_EQ(zero_comm_create_node(&comm, node, 5.0), ZERO_OK) << LastError();
  ASSERT_EQ(zero_devices_node_info(node, text, sizeof(text), &needed), ZERO_OK);
  EXPECT_NE(std::string(text).find("\"local_world\": 1"), std::string::npos) << text;
  void* send = nullptr;
  void* recv = nullptr;
  ASSERT_EQ(zero_devices_allocate(node, 0, 4 * sizeof(float), &send), ZERO_OK);
  ASSERT_EQ(zero_devices_allocate(node, 0, 4 * sizeof(float), &recv), ZERO_OK);
  float* in = static_cast<float*>(send);
  float* out = static_cast<float*>(recv);
  for (int i = 0; i < 4; ++i) in[i] = 1.5f * i;
  constexpr int kF32 = ZERO_F32, kSum = ZERO_SUM;
  EXPECT_EQ(zero_comm_all_gather(comm, send, recv, 4, kF32), ZERO_OK);
  EXPECT_EQ(out[3], 4.5f);
  EXPECT_EQ(zero_comm_all_reduce(comm, send, recv, 4, kF32, kSum), ZERO_OK);
  EXPECT_EQ(out[2], 3.0f);
  EXPECT_EQ(zero_comm_reduce_scatter(comm, send, recv, 4, kF32, kSum), ZERO_OK);
  EXPECT_EQ(out[1], 1.5f);
  EXPECT_EQ(zero_comm_all_gather(comm, send, recv, 4, 99), ZERO_INVALID_ARGUMENT);
  EXPECT_EQ(zero_comm_reduce_scatter(comm, send, recv, 4, kF32, 99), ZERO_INVALID_ARGUMENT);
  EXPECT_EQ(zero_comm_all_reduce(nullptr, send, recv, 4, kF32, kSum), ZERO_INVALID_ARGUMENT);
  EXPECT_EQ(zero_devices_free(node, 0, send, 4 * sizeof(float)), ZERO_OK);
  EXPECT_EQ(zero_devices_free(node, 0, recv, 4 * sizeof(float)), ZERO_OK);
  EXPECT_EQ(zero_devices_free(node, 0, recv, 4 * sizeof(float)), ZERO_FAILED_PRECONDITION);  // twice
  zero_comm_destroy(comm);
  zero_devices_destroy(node);
}

TEST(CapiAbi, ParamSpecsOfAnotherSizeAreRefused) {
  zero_devices_t devices = nullptr;
  ASSERT_EQ(zero_devices_create(&devices, "host:1x64MiB"), ZERO_OK);
  zero_param_spec params[] = {{sizeof(zero_param_spec), "a", 40, 0, 0},
                              {sizeof(zero_param_spec) - 4, "b", 40, 0, 0}};
  zero_comm_t comm = nullptr;
  ASSERT_EQ(zero_comm_create_local(&comm, 1, 5, nullptr), ZERO_OK);
  zero_engine_t engine = nullptr;
  EXPECT_EQ(zero_engine_create(&engine, kConfig, params, 2, comm, devices, 0),
            ZERO_INVALID_ARGUMENT);
  EXPECT_EQ(engine, nullptr);
  const std::string expected = "params[1]: zero_param_spec.size is " +
                               std::to_string(sizeof(zero_param_spec) - 4) +
                               ", but this library's zero_param_spec is " +
                               std::to_string(sizeof(zero_param_spec)) + " bytes";
  EXPECT_NE(LastError().find(expected), std::string::npos) << LastError();
  zero_comm_destroy(comm);
  zero_devices_destroy(devices);
}

// Checked before the engine is made: every rank has the same specs, so
// every rank fails alike.
TEST(CapiAbi, AParameterInAGroupNotConfiguredIsNamed) {
  zero_devices_t devices = nullptr;
  ASSERT_EQ(zero_devices_create(&devices, "host:1x64MiB"), ZERO_OK);
  const zero_param_spec params[] = {{sizeof(zero_param_spec), "a", 40, 0, 0},
                                    {sizeof(zero_param_spec), "b", 40, 0, 1}};
  zero_comm_t comm = nullptr;
  ASSERT_EQ(zero_comm_create_local(&comm, 1, 5, nullptr), ZERO_OK);
  zero_engine_t engine = nullptr;
  EXPECT_EQ(zero_engine_create(&engine, kConfig, params, 2, comm, devices, 0),
            ZERO_INVALID_ARGUMENT);
  EXPECT_NE(LastError().find("parameter 'b' is in group 1; 1 groups are configured"),
            std::string::npos)
      << LastError();
  zero_comm_destroy(comm);
  zero_devices_destroy(devices);
}

TEST(CapiFormula, IsTheModelStateFormula) {
  double device = 0, host = 0, nvme = -1;
  // bf16 AdamW at stage 3 over 4 ranks: the paper's 16 bytes per parameter / N.
  ASSERT_EQ(zero_model_state_bytes(1 << 20, 4, 3, 2, 2, 12, ZERO_OFFLOAD_NONE, 0, 1, &device,
                                   &host, &nvme),
            ZERO_OK)
      << LastError();
  EXPECT_EQ(device, 16.0 * (1 << 20) / 4);
  EXPECT_EQ(host, 0);
  EXPECT_EQ(nvme, 0);
  // Offload at stage 2 with NVMe, every output against the C++ function.
  const zero::ModelStateBytes expected = zero::ModelStateFormula(
      {.psi = 4096, .ranks = 8, .stage = 2, .param_bytes = 2, .grad_bytes = 2,
       .optimizer_bytes = 12, .offload_optimizer = true, .nvme = true, .accumulation = 2});
  ASSERT_EQ(zero_model_state_bytes(4096, 8, 2, 2, 2, 12, ZERO_OFFLOAD_OPTIMIZER, 1, 2, &device,
                                   &host, &nvme),
            ZERO_OK)
      << LastError();
  EXPECT_EQ(device, expected.device());
  EXPECT_EQ(host, expected.host);
  EXPECT_EQ(nvme, expected.nvme);
  EXPECT_GT(nvme, 0);
  // Outputs not wanted may be NULL.
  EXPECT_EQ(zero_model_state_bytes(4096, 8, 1, 4, 4, 8, ZERO_OFFLOAD_NONE, 0, 1, nullptr,
                                   nullptr, nullptr),
            ZERO_OK);
}

TEST(CapiFormula, BadInputIsNamed) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  struct Case {
    double psi;
    int ranks, stage;
    double p, k;
    int offload, nvme, accumulation;
    const char* named;
  };
  const Case cases[] = {
      {-1, 4, 3, 2, 12, ZERO_OFFLOAD_NONE, 0, 1, "psi is -1"},
      {nan, 4, 3, 2, 12, ZERO_OFFLOAD_NONE, 0, 1, "psi is nan"},
      {100, 0, 3, 2, 12, ZERO_OFFLOAD_NONE, 0, 1, "ranks is 0"},
      {100, 4, 4, 2, 12, ZERO_OFFLOAD_NONE, 0, 1, "stage is 4"},
      {100, 4, 3, -2, 12, ZERO_OFFLOAD_NONE, 0, 1, "param_bytes is -2"},
      {100, 4, 3, 2, INFINITY, ZERO_OFFLOAD_NONE, 0, 1, "optimizer_bytes is inf"},
      {100, 4, 3, 2, 12, 7, 0, 1, "offload code 7"},
      {100, 4, 2, 2, 12, ZERO_OFFLOAD_PARAMETERS, 0, 1, "parameter offload"},
      {100, 4, 3, 2, 12, ZERO_OFFLOAD_NONE, 1, 1, "nvme needs offload"},
      {100, 4, 3, 2, 12, ZERO_OFFLOAD_NONE, 0, 0, "accumulation is 0"},
  };
  for (const Case& c : cases) {
    double device = -7;
    EXPECT_EQ(zero_model_state_bytes(c.psi, c.ranks, c.stage, c.p, c.p, c.k, c.offload, c.nvme,
                                     c.accumulation, &device, nullptr, nullptr),
              ZERO_INVALID_ARGUMENT)
        << c.named;
    EXPECT_NE(LastError().find(c.named), std::string::npos) << LastError();
    EXPECT_EQ(device, -7) << "an output was written on error";
  }
}

// zero_reduce_in_rank_order (ABI 1.2): the rank-order sum the Python
// package's callbacks run, and its refusals, each naming what is wrong with
// nothing written.
TEST(CapiReduce, SumsInRankOrderAndRefusesBadCodesAndSizes) {
  // 3 ranks x 2 elements, rank 0 first: element 0 is 1e8, 1, -1e8 by rank.
  const float chunks[] = {1e8f, 2.0f, 1.0f, 3.0f, -1e8f, 4.0f};
  float out[2] = {-7, -7};
  ASSERT_EQ(zero_reduce_in_rank_order(chunks, 3, 2, ZERO_F32, ZERO_SUM, out), ZERO_OK)
      << LastError();
  EXPECT_EQ(out[0], (1e8f + 1.0f) + -1e8f) << "rank order: 0, not 1";
  EXPECT_EQ(out[1], 2.0f + 3.0f + 4.0f);
  float untouched[2] = {-7, -7};
  EXPECT_EQ(zero_reduce_in_rank_order(chunks, 3, 2, 42, ZERO_SUM, untouched),
            ZERO_INVALID_ARGUMENT);
  EXPECT_NE(LastError().find("42"), std::string::npos) << LastError();
  EXPECT_EQ(zero_reduce_in_rank_order(chunks, 3, 2, ZERO_F32, 13, untouched),
            ZERO_INVALID_ARGUMENT);
  EXPECT_NE(LastError().find("13"), std::string::npos) << LastError();
  EXPECT_EQ(zero_reduce_in_rank_order(chunks, 0, 2, ZERO_F32, ZERO_SUM, untouched),
            ZERO_INVALID_ARGUMENT);
  EXPECT_NE(LastError().find("world size 0"), std::string::npos) << LastError();
  EXPECT_EQ(zero_reduce_in_rank_order(nullptr, 3, 2, ZERO_F32, ZERO_SUM, untouched),
            ZERO_INVALID_ARGUMENT);
  EXPECT_NE(LastError().find("null"), std::string::npos) << LastError();
  EXPECT_EQ(untouched[0], -7);
  EXPECT_EQ(untouched[1], -7);
}

}  // namespace

# zero_fuzzer(name, srcs, deps, corpus): one libFuzzer target, three ways.
#   name                 under --config=fuzz (clang): the libFuzzer binary
#                        bench/fuzz.sh runs; otherwise a replay of the files
#                        given as arguments.
#   name + "_corpus_test" the checked-in seed corpus (corpus/<corpus>/),
#                        replayed in the normal build: every seed, and every
#                        input a fuzzer once crashed on, stays a test.
# `srcs` define LLVMFuzzerTestOneInput.
def zero_fuzzer(name, srcs, deps, corpus):
    native.cc_library(
        name = name + "_lib",
        testonly = True,
        srcs = srcs,
        deps = deps,
        alwayslink = True,
    )
    native.cc_binary(
        name = name,
        testonly = True,
        deps = [":" + name + "_lib"] + select({
            "//bazel:fuzzing": [],
            "//conditions:default": [":replay_main"],
        }),
        linkopts = select({
            "//bazel:fuzzing": ["-fsanitize=fuzzer"],
            "//conditions:default": [],
        }),
    )
    native.cc_test(
        name = name + "_corpus_test",
        size = "small",
        deps = [":" + name + "_lib", ":replay_main"],
        data = native.glob(["corpus/" + corpus + "/**"]),
        args = ["tests/fuzz/corpus/" + corpus],
    )

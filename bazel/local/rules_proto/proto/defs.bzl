# Offline stand-in for @rules_proto: re-exports the native rules @bazel_tools loads.
load(":builtins.bzl", "BUILTIN_PROTO_INFO")

ProtoInfo = BUILTIN_PROTO_INFO
proto_lang_toolchain = native.proto_lang_toolchain
proto_library = native.proto_library

# cuda_library(name, srcs, hdrs = [], deps = [], copts = [], **kwargs): nvcc compiles each .cu
# (C++20, -O3, -fPIC, SASS sm_80 + sm_90, PTX compute_90; copts appended) seeing the repo root,
# CUDA + CCCL headers, hdrs, and the headers and include paths of deps (any cc_library). Yields
# cc_library `name` (hdrs, deps, static cudart, linkstatic; kwargs e.g. alwayslink go to it).

NVCC = "/usr/local/cuda/bin/nvcc"

CUDA_GENCODE = [
    "-gencode=arch=compute_80,code=sm_80",
    "-gencode=arch=compute_90,code=sm_90",
    "-gencode=arch=compute_90,code=compute_90",
]

def _cuda_objects_impl(ctx):
    cc_infos = [d[CcInfo] for d in ctx.attr.deps]
    cc = cc_common.merge_cc_infos(cc_infos = cc_infos).compilation_context
    inputs = depset(ctx.files.hdrs, transitive = [cc.headers])

    flags = ["-std=c++20", "-O3", "-Xcompiler", "-fPIC"] + CUDA_GENCODE
    # quote_includes always holds the repo root and its bin dir (generated files).
    # Other repositories' headers (abseil) go in as system headers, so nvcc
    # warns about ours only, as gcc does (nvcc flags abseil's own status
    # assignments, #2810).
    for p in cc.quote_includes.to_list() + cc.includes.to_list():
        third_party = p.startswith("external/") or "/external/" in p
        flags += ["-isystem", p] if third_party else ["-I" + p]
    for p in cc.system_includes.to_list():
        flags += ["-isystem", p]
    flags += ["-D" + d for d in cc.defines.to_list()]
    flags += ctx.attr.copts

    objs = []
    seen = {}
    for src in ctx.files.srcs:
        stem = src.basename.rsplit(".", 1)[0]
        if stem in seen:
            fail("cuda_library %s: two sources named %s" % (ctx.label, stem))
        seen[stem] = True
        obj = ctx.actions.declare_file("_cuda_objs/%s/%s.o" % (ctx.attr.lib_name, stem))
        ctx.actions.run(
            executable = NVCC,
            arguments = flags + ["-c", src.path, "-o", obj.path],
            inputs = depset([src], transitive = [inputs]),
            outputs = [obj],
            mnemonic = "CudaCompile",
            progress_message = "nvcc %s" % src.short_path,
            use_default_shell_env = True,  # nvcc finds gcc on PATH
        )
        objs.append(obj)
    return [DefaultInfo(files = depset(objs))]

_cuda_objects = rule(
    implementation = _cuda_objects_impl,
    attrs = {
        "srcs": attr.label_list(allow_files = [".cu"]),
        "hdrs": attr.label_list(allow_files = True),
        "deps": attr.label_list(providers = [CcInfo]),
        "copts": attr.string_list(),
        "lib_name": attr.string(),
    },
)

def cuda_library(name, srcs, hdrs = [], deps = [], copts = [], **kwargs):
    cuda_deps = ["@cuda//:cuda_headers", "@cuda//:cudart_static"]
    _cuda_objects(
        name = name + "_cuda_objs",
        srcs = srcs,
        hdrs = hdrs,
        deps = deps + cuda_deps,
        copts = copts,
        lib_name = name,
        visibility = ["//visibility:private"],
    )
    native.cc_library(
        name = name,
        srcs = [name + "_cuda_objs"],
        hdrs = hdrs,
        deps = deps + cuda_deps,
        # Without this, tests link the objects into a .so of their own and fail
        # at start on an undefined __cudaPopCallConfiguration (static cudart).
        linkstatic = True,
        **kwargs
    )

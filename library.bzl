"""ember_shared_library: ember as one library for programs outside this repository.

Bazel 4.2 has no stable cc_shared_library, and a cc_binary(linkshared) keeps only the objects something
references. This rule links every object of `deps`' static archives, whole, into
lib<library_name>.so.<version> (soname lib<library_name>.so.<major>) and into lib<library_name>.a,
exports only the symbols `version_script` names, and writes the list of the headers `deps` declare
(this repository's own, repository-relative): what scripts/install.sh copies.
"""

load("@bazel_tools//tools/cpp:toolchain_utils.bzl", "find_cpp_toolchain")

def _archives_and_flags(deps):
    archives, flags, seen = [], [], {}
    for dep in deps:
        for linker_input in dep[CcInfo].linking_context.linker_inputs.to_list():
            for flag in linker_input.user_link_flags:
                if flag not in flags:
                    flags.append(flag)
            for lib in linker_input.libraries:
                archive = lib.pic_static_library or lib.static_library
                if archive and archive.path not in seen:
                    seen[archive.path] = True
                    archives.append(archive)
    return archives, flags

def _ember_shared_library_impl(ctx):
    cc_toolchain = find_cpp_toolchain(ctx)
    archives, flags = _archives_and_flags(ctx.attr.deps)
    major = ctx.attr.version.split(".")[0]
    name = ctx.attr.library_name
    so = ctx.actions.declare_file("lib%s.so.%s" % (name, ctx.attr.version))
    static = ctx.actions.declare_file("lib%s.a" % name)
    headers = ctx.actions.declare_file("%s_headers.txt" % name)
    linker = cc_toolchain.compiler_executable
    ctx.actions.run_shell(
        outputs = [so],
        inputs = depset(archives + [ctx.file.version_script], transitive = [cc_toolchain.all_files]),
        command = " ".join([
            linker,
            "-shared",
            "-o",
            so.path,
            "-Wl,-soname,lib%s.so.%s" % (name, major),
            "-Wl,--version-script=" + ctx.file.version_script.path,
            "-Wl,--no-undefined",
            "-Wl,--whole-archive",
        ] + [a.path for a in archives] + ["-Wl,--no-whole-archive"] + flags + ["-lstdc++", "-lm"]),
        mnemonic = "EmberSharedLibrary",
        use_default_shell_env = True,  # the compiler finds ld on PATH
        progress_message = "Linking %s" % so.short_path,
    )
    # One static archive of every member (ar's MRI script keeps members of the same name apart).
    script = "create %s\n" % static.path + "".join(["addlib %s\n" % a.path for a in archives]) + "save\nend\n"
    ctx.actions.run_shell(
        outputs = [static],
        inputs = depset(archives, transitive = [cc_toolchain.all_files]),
        command = "printf '%%s' '%s' | %s -M" % (script, cc_toolchain.ar_executable),
        mnemonic = "EmberStaticLibrary",
        use_default_shell_env = True,
    )
    own = {}
    for dep in ctx.attr.deps:
        for h in dep[CcInfo].compilation_context.headers.to_list():
            if h.owner.workspace_name == "" and h.is_source:
                own[h.short_path] = h
    ctx.actions.write(headers, "\n".join(sorted(own.keys())) + "\n")
    # The outputs and the headers travel in the runfiles too, for tests that install from them.
    outputs = [so, static, headers]
    return [DefaultInfo(files = depset(outputs), runfiles = ctx.runfiles(files = outputs + own.values()))]

ember_shared_library = rule(
    implementation = _ember_shared_library_impl,
    attrs = {
        "deps": attr.label_list(providers = [CcInfo]),
        "library_name": attr.string(mandatory = True),
        "version": attr.string(mandatory = True),
        "version_script": attr.label(allow_single_file = True, mandatory = True),
        "_cc_toolchain": attr.label(default = Label("@bazel_tools//tools/cpp:current_cc_toolchain")),
    },
    toolchains = ["@bazel_tools//tools/cpp:toolchain_type"],
    fragments = ["cpp"],
)

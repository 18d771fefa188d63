"""Reads zero/capi/zero_engine.h's C declarations (prototypes, the structs
the caller fills, integer constants) and lists every way python/zero/_lib.py's
ctypes tables differ from them. What test_abi.py runs on the real header,
and on altered copies to show each kind of difference is caught.

The parser knows the header's own style, not all of C: one declaration per
statement, no nested parentheses but function-pointer fields, constants as
`NAME = number` in enums or `#define NAME number`. A declaration it cannot
read fails the check instead of being skipped."""

import ctypes
import re

_P = ctypes.POINTER


def _c_types(lib):
    """C type (as written, spaces normalized) -> the ctypes type _lib must
    use: scalars as themselves, handles and data pointers as c_void_p
    (Python passes addresses), out-parameters as POINTER(...)."""
    p, i, sz, d = ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t, ctypes.c_double
    types = {"int": i, "double": d, "size_t": sz, "int64_t": ctypes.c_int64, "void": None,
             "const char*": ctypes.c_char_p, "char*": ctypes.c_char_p,
             "void*": p, "const void*": p, "const float*": p, "float*": p, "void**": _P(p),
             "int*": _P(i), "size_t*": _P(sz), "double*": _P(d),
             "const zero_param_spec*": _P(lib.ParamSpec),
             "const zero_collectives*": _P(lib.Collectives)}
    for handle in ("zero_devices_t", "zero_comm_t", "zero_engine_t"):
        types[handle], types[handle + "*"] = p, _P(p)
    return types


def _strip_comments(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def _type_of(decl):
    """The type of one parameter or field declaration, its name dropped:
    'const char* name' -> 'const char*'."""
    tokens = re.findall(r"\w+|\*", decl)
    if len(tokens) > 1 and re.match(r"\w", tokens[-1]) and tokens[-2] not in ("const", "struct"):
        tokens = tokens[:-1]
    return " ".join(tokens).replace(" *", "*")


def _params(text):
    text = text.strip()
    if text in ("", "void"):
        return []
    return [_type_of(a) for a in text.split(",")]


def parse(header_text):
    """{"functions": {name: (ret, [args])}, "structs": {name: [(field, type)]},
    "constants": {name: int}}; a field's type is a C type, or (ret, [args])
    for a function pointer."""
    text = _strip_comments(header_text)
    constants = {m.group(1): int(m.group(2))
                 for m in re.finditer(r"#define\s+(ZERO_\w+)\s+(-?\d+)\b", text)}
    text = re.sub(r"#[^\n]*", " ", text)
    for body in re.findall(r"\benum\b[^{;]*\{(.*?)\}", text, flags=re.S):
        for item in body.split(","):
            if item.strip():
                m = re.fullmatch(r"\s*(\w+)\s*=\s*(-?\d+)\s*", item)
                if m is None:
                    raise ValueError("cannot read the enum item '%s'" % item.strip())
                constants[m.group(1)] = int(m.group(2))
    text = re.sub(r"\benum\b[^{;]*\{.*?\}\s*;", " ", text, flags=re.S)
    structs = {}
    for m in re.finditer(r"typedef\s+struct\s+(\w+)\s*\{(.*?)\}\s*(\w+)\s*;", text, flags=re.S):
        fields = []
        for decl in filter(str.strip, m.group(2).split(";")):
            fp = re.fullmatch(r"\s*(.+?)\(\s*\*\s*(\w+)\s*\)\s*\((.*)\)\s*", decl, flags=re.S)
            if fp:
                fields.append((fp.group(2), (_type_of(fp.group(1)), _params(fp.group(3)))))
            else:
                fields.append((re.findall(r"\w+", decl)[-1], _type_of(decl)))
        structs[m.group(3)] = fields
    text = re.sub(r"typedef[^;{]*(\{.*?\})?[^;]*;", " ", text, flags=re.S)
    functions = {}
    for decl in filter(str.strip, text.split(";")):
        decl = " ".join(decl.replace('extern "C" {', " ").replace("}", " ").split())
        if not decl:
            continue
        m = re.fullmatch(r"(.+?)\b(zero_\w+)\s*\((.*)\)", decl)
        if m is None:
            raise ValueError("cannot read the declaration '%s'" % decl)
        functions[m.group(2)] = (_type_of(m.group(1)), _params(m.group(3)))
    return {"functions": functions, "structs": structs, "constants": constants}


def _name(t):
    return "void" if t is None else t.__name__


def _same(c_type, ctypes_type, types, where, out):
    if c_type not in types:
        out.append("%s: no ctypes type is known for the C type '%s'" % (where, c_type))
    elif types[c_type] is not ctypes_type:
        out.append("%s: the header has '%s' (%s), _lib.py %s"
                   % (where, c_type, _name(types[c_type]), _name(ctypes_type)))


def _compare_call(where, c_sig, restype, argtypes, types, out):
    ret, args = c_sig
    _same(ret, restype, types, where + " returns", out)
    if len(args) != len(argtypes):
        out.append("%s: the header has %d arguments (%s), _lib.py %d"
                   % (where, len(args), ", ".join(args), len(argtypes)))
        return
    for n, (c_type, t) in enumerate(zip(args, argtypes)):
        _same(c_type, t, types, "%s argument %d" % (where, n + 1), out)


def _compare_struct(name, c_fields, struct, types, out):
    fields = list(getattr(struct, "_fields_", []))
    if [f for f, _ in c_fields] != [f for f, _ in fields]:
        out.append("struct %s: the header's fields are %s, _lib.py's %s"
                   % (name, [f for f, _ in c_fields], [f for f, _ in fields]))
        return
    for (field, c_type), (_, t) in zip(c_fields, fields):
        where = "struct %s.%s" % (name, field)
        if isinstance(c_type, tuple):
            if not hasattr(t, "_argtypes_"):
                out.append("%s: a function pointer in the header, %s in _lib.py" % (where, t))
            else:
                _compare_call(where, c_type, t._restype_, list(t._argtypes_), types, out)
        else:
            _same(c_type, t, types, where, out)


def differences(header_text, lib):
    """Every difference between the header and `lib` (the _lib module), as
    sentences; [] when they agree."""
    try:
        header = parse(header_text)
    except ValueError as e:
        return ["the header cannot be read: %s" % e]
    types, out = _c_types(lib), []
    functions = header["functions"]
    for name in sorted(set(functions) - set(lib.SIGNATURES)):
        out.append("%s is in the header but not in _lib.SIGNATURES" % name)
    for name in sorted(set(lib.SIGNATURES) - set(functions)):
        out.append("%s is in _lib.SIGNATURES but not in the header" % name)
    for name in sorted(set(functions) & set(lib.SIGNATURES)):
        restype, argtypes = lib.SIGNATURES[name]
        _compare_call(name, functions[name], restype, argtypes, types, out)
    for name, struct in (("zero_param_spec", lib.ParamSpec), ("zero_collectives", lib.Collectives)):
        if name not in header["structs"]:
            out.append("struct %s is not in the header" % name)
        else:
            _compare_struct(name, header["structs"][name], struct, types, out)
    constants = header["constants"]
    version = (constants.get("ZERO_ABI_VERSION_MAJOR"), constants.get("ZERO_ABI_VERSION_MINOR"))
    if version != tuple(lib.ABI_VERSION):
        out.append("the header is ABI %s.%s, _lib.ABI_VERSION %s" % (version + (lib.ABI_VERSION,)))
    for name in ("F16", "F32", "BF16", "SUM", "MAX", "AVG", "OFFLOAD_NONE", "OFFLOAD_OPTIMIZER",
                 "OFFLOAD_PARAMETERS"):
        if constants.get("ZERO_" + name) != getattr(lib, name, None):
            out.append("ZERO_%s is %s in the header, _lib.%s %s"
                       % (name, constants.get("ZERO_" + name), name, getattr(lib, name, None)))
    return out

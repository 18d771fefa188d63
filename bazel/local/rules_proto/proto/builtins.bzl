# ProtoInfo cannot be re-exported under its own name in the file that reads it.
BUILTIN_PROTO_INFO = ProtoInfo

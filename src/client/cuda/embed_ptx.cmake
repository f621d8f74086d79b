# cmake -DPTX=<file.ptx> -DOUT=<file.cc> -P embed_ptx.cmake: writes the PTX as a C string.
file(READ "${PTX}" ptx)
# A raw string literal: PTX is plain ASCII and never contains the delimiter.
file(WRITE "${OUT}.tmp" "// Generated from ${PTX} by embed_ptx.cmake.\nextern \"C\" const char objdirect_crc32c_ptx[] = R\"objdirect_ptx(${ptx})objdirect_ptx\";\n")
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)

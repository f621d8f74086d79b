extern "C" const char objdirect_crc32c_ptx[] = "";  // built without nvcc: no kernel

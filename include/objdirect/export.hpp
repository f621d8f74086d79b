// OBJDIRECT_API: marks what libobjdirect.so exports.
//
// The library is built with hidden default visibility (-fvisibility=hidden
// -fvisibility-inlines-hidden), so only declarations carrying OBJDIRECT_API are part of its
// dynamic symbol table: the classes and functions of the public headers in include/objdirect/.
// Everything else (src/client, src/common, ...) stays internal; tools and tests that need it link
// the static libraries instead (docs/architecture.md, "The public API"). The same attribute in an
// application marks the symbols it imports; in a static library or program it changes nothing.
#pragma once

// objdirect.h (the C API, self-contained) defines the same macro the same way.
#ifndef OBJDIRECT_API
#if defined(__cplusplus)
#define OBJDIRECT_API [[gnu::visibility("default")]]
#else
#define OBJDIRECT_API __attribute__((visibility("default")))
#endif
#endif

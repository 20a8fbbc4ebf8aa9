/* propose_backend_name.c — the names of the kernel language choice
 * (`--backend triton|cuda|auto`), apart from the generators so that the
 * server's settings (and the LSP fuzzer, which stubs the engine) need only
 * this. */
#include "mk_propose.h"

#include <string.h>

static const char *const backend_names[] = {"triton", "cuda", "auto"};

const char *mk_kernel_backend_name(mk_kernel_backend b) {
  return (unsigned)b < sizeof backend_names / sizeof backend_names[0] ? backend_names[b] : "triton";
}

int mk_kernel_backend_parse(const char *name, mk_kernel_backend *out) {
  for (unsigned i = 0; name && i < sizeof backend_names / sizeof backend_names[0]; i++)
    if (strcmp(name, backend_names[i]) == 0) {
      *out = (mk_kernel_backend)i;
      return 0;
    }
  return MK_EINVAL;
}


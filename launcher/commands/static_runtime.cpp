#include "commands/static_runtime.hpp"

#if defined(NPU_RUN_STATIC_BUILD)
#include <nss.h>
#include <openssl/crypto.h>
#endif

namespace npu_run {

void prepare_static_runtime() {
#if defined(NPU_RUN_STATIC_BUILD)
  // glibc builds "files" and "dns" in (2.34+); any other module of nsswitch.conf ("myhostname",
  // "resolve", "sss", "mdns4") would be dlopened from the host. Documented in the README ("Install").
  __nss_configure_lookup("hosts", "files dns");
  // HMAC-SHA256 and RAND_bytes need only the built-in default provider; a host's config may
  // load a FIPS provider or engines of its own OpenSSL.
  OPENSSL_init_crypto(OPENSSL_INIT_NO_LOAD_CONFIG, nullptr);
#endif
}

}  // namespace npu_run

// Keeps a static npu_run from loading anything of the host it runs on. It carries its own glibc
// and libcrypto, but both would still read the host's configuration and dlopen the modules it
// names, built for another glibc or OpenSSL (libnss_myhostname aborts the process).
#pragma once

namespace npu_run {

// Static builds: host names resolve through /etc/hosts and DNS only (nsswitch.conf is not
// read for hosts), and libcrypto reads no openssl.cnf. Dynamic builds: nothing changes.
void prepare_static_runtime();

}  // namespace npu_run

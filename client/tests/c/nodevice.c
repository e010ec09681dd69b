/* No RDMA device on this host (a kernel without InfiniBand: libibverbs
 * reports ENOSYS) and no GPU runtime: init through the real libibverbs and
 * HIP loaders fails cleanly with hipObjNicNotFound, nothing is left behind,
 * and the library stays usable. HIPOBJ_PROVIDER is auto: a hardware NIC
 * name never falls back to the software provider. */
#include "check.h"

static hipObjConfig_t config_for(const char* nic) {
    hipObjConfig_t config;
    memset(&config, 0, sizeof config);
    config.gpuDevice = -1;
    config.nicHint = nic;
    return config;
}

int main(void) {
    const char* hardware[] = {"mlx5_0", "bnxt_re0", "ionic_0", "rxe0"};
    for (size_t i = 0; i < sizeof hardware / sizeof hardware[0]; i++) {
        hipObjConfig_t c = config_for(hardware[i]);
        for (int round = 0; round < 20; round++) {
            CHECK_OP(hipObjInit(&c), hipObjNicNotFound);
        }
        /* Nothing was published. */
        CHECK_OP(hipObjShutdown(), hipObjNotInitialized);
    }
    /* No GPU and no hint: nothing to open. */
    hipObjConfig_t none = config_for(NULL);
    CHECK_OP(hipObjInit(&none), hipObjNicNotFound);
    /* The software device still works afterwards. */
    hipObjConfig_t soft = config_for("soft0");
    CHECK_OP(hipObjInit(&soft), hipObjSuccess);
    CHECK_OP(hipObjShutdown(), hipObjSuccess);
    return finish("nodevice");
}

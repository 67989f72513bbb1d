// The public header compiles alone as C++ (built twice, -std=c++11 and -std=c++17, with the
// project's warnings and -Werror) and its extern "C" declarations link against the library.
#include <chring.h>

#include <cstdio>
#include <cstring>

int main()
{
    chring_config_t config;
    chring_config_default(&config);
    config.profile = CHRING_PROFILE_XXH3;

    chring_t *r = nullptr;
    if (chring_new(&r, &config) != 0)
        return 1;
    chring_change_t changes[] = {{"alpha", 1, nullptr}, {"beta", 1, nullptr}};
    if (chring_sync(r, changes, sizeof changes / sizeof changes[0]) != 0)
        return 1;

    const chring_snap_t *s = chring_snap_enter(r);
    const chring_member_t *m = chring_snap_lookup(s, "key", 3);
    bool ok = m != nullptr && chring_snap_profile(s) == CHRING_PROFILE_XXH3;
    chring_snap_exit(r, s);

    chring_lease_t lease = chring_lease_t();
    ok = ok && chring_acquire(r, "key", 3, &lease) == 0;
    chring_release(r, &lease);

    uint64_t (*hash)(const void *, size_t) = chring_hash64;
    ok = ok && hash("", 0) == UINT64_C(0xf52a15e9a9b5e89b);
    chring_free(&r);
    std::printf("%s %s\n", chring_version(), ok ? "ok" : "FAILED");
    return ok ? 0 : 1;
}

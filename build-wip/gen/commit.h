#define MURMUR_COMMIT "bf6fdce-dirty"

#define MURMUR_COMMIT "78b0d78-dirty"

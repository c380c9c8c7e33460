"""Random bit generation (rng-bit-generator), bit-exact with XLA."""
HELPERS = ()

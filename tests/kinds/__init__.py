"""Order kinds declared by the tests, to prove what declaring a kind takes."""

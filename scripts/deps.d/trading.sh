# Trading API black-box test: a standard-library Python client.
need_apt python3

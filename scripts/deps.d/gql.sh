# GraphQL demo (sourced by scripts/deps.sh from the repository root): Debian's Chromium and a
# font for the explorer test, and the npm packages of servers/gql/tests/js (graphql-js,
# playwright-core driving /usr/bin/chromium, and the GraphiQL/React files the explorer serves
# offline). npm ci runs only when package-lock.json changed since the last install.
need_apt chromium fonts-dejavu-core

gql_js_install() {
    local dir=servers/gql/tests/js
    local stamp="$dir/node_modules/.gql-installed-lock"
    if [ -f "$stamp" ] && cmp -s "$dir/package-lock.json" "$stamp"; then
        return 0
    fi
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
    cp "$dir/package-lock.json" "$stamp"
}
gql_js_install

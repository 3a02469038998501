# shellcheck shell=bash
# apt-mirror.sh — sourced by setup.sh and fetch-cuda-headers.sh: the archive this machine's apt
# already uses, so that a source they write goes through the same local mirror or proxy instead
# of a hard-coded host that may not resolve here.
#
# apt_mirror CODENAME [WHO]: prints the URI of the first Debian or Ubuntu source (in apt's order:
# /etc/apt/sources.list, then /etc/apt/sources.list.d/*.list and *.sources by name) of type deb
# whose suites hold CODENAME itself (bookworm, not bookworm-security or bookworm-updates) and
# whose components hold main, without a trailing slash. Both forms are read: one-line
# "deb [options] URI suite component..." and deb822 stanzas (Types:, URIs:, Suites:,
# Components:, Enabled: no skipped). When there is none, it says so on stderr in one sentence
# (after "WHO: ") naming the files it read, and prints the official Debian archive instead:
# apt-get then either reaches it or fails with its own error, which the callers report.
#
# COURSE_SETUP_ROOT (tests only) reads the sources under another root, to play a machine with
# other sources.
apt_mirror_official=http://deb.debian.org/debian

apt_mirror() {
    local codename=$1 who=${2:+$2: } etc=${COURSE_SETUP_ROOT:-}/etc/apt file uri
    local files=("$etc/sources.list")
    for file in "$etc"/sources.list.d/*; do
        case "$file" in *.list | *.sources) files+=("$file") ;; esac
    done
    for file in "${files[@]}"; do
        [ -f "$file" ] || continue
        # awk prints the first matching URI of the file; "cdrom:" sources cannot serve a suite.
        uri=$(awk -v codename="$codename" -v deb822="$([[ $file == *.sources ]] && echo 1 || echo 0)" '
            function has(list, word,   n, i, w) {
                n = split(list, w, " ")
                for (i = 1; i <= n; i++) if (w[i] == word) return 1
                return 0
            }
            function pick(uris, types,   n, u) {
                n = split(uris, u, " ")
                if (has(types, "deb") && u[1] ~ /^[a-z+]+:/ && u[1] !~ /^cdrom:/) {
                    sub(/\/$/, "", u[1]); print u[1]; done = 1; exit
                }
            }
            function stanza() {  # the deb822 stanza read so far
                if (tolower(f["enabled"]) != "no" && has(f["suites"], codename) && has(f["components"], "main"))
                    pick(f["uris"], f["types"])
                delete f; key = ""
            }
            deb822 && /^[ \t]*#/ { next }
            deb822 && /^[ \t]*$/ { stanza(); next }
            deb822 && /^[ \t]/ { if (key != "") f[key] = f[key] " " $0; next }
            deb822 {
                key = tolower(substr($0, 1, index($0, ":") - 1))
                f[key] = substr($0, index($0, ":") + 1)
                gsub(/^[ \t]+|[ \t]+$/, "", f[key]); next
            }
            END { if (deb822 && !done) stanza() }
            !deb822 {
                sub(/#.*/, "")
                if ($1 != "deb") next
                line = $0
                sub(/^[ \t]*deb[ \t]+/, "", line)
                if (line ~ /^\[/) sub(/^\[[^]]*\][ \t]*/, "", line)  # [arch=... signed-by=...]
                n = split(line, w, " ")
                if (n >= 3 && w[2] == codename && has(line, "main")) pick(w[1], "deb")
            }' "$file")
        if [ -n "$uri" ]; then
            echo "$uri"
            return 0
        fi
    done
    echo "${who}no apt source for $codename with main found in $etc/sources.list, $etc/sources.list.d/*.list or" \
        "$etc/sources.list.d/*.sources, so the official archive $apt_mirror_official is used." >&2
    echo "$apt_mirror_official"
}

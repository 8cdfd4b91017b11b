# Sourced by the scripts: a line in the reader's language, as the command lines choose it
# (RSVC_LANG, LC_ALL, LC_MESSAGES, LANG: Chinese under zh*, else English).
#   say2 "English" "中文"     the line on stdout
case "${RSVC_LANG:-${LC_ALL:-${LC_MESSAGES:-${LANG:-}}}}" in zh*) RSVC_SAY_ZH=1 ;; *) RSVC_SAY_ZH=0 ;; esac
say2() { if [ "$RSVC_SAY_ZH" = 1 ]; then printf '%s\n' "$2"; else printf '%s\n' "$1"; fi; }

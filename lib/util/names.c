/* The name rule shared by the catalog and placement (include/ferry/names.h). */
#include "ferry/names.h"

#include <string.h>

bool ferry_name_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n >= FERRY_NAME_MAX || !strcmp(s, ".") || !strcmp(s, ".."))
        return false;
    for (const char *p = s; *p; p++) {
        char ch = *p;
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '_' || ch == '.' || ch == '-'))
            return false;
    }
    return true;
}

/* Link-time stand-in for libdl.so.2 before glibc 2.34 (README). */
void dlsym(void) {}
void dladdr(void) {}
void dlvsym(void) {}
void dlerror(void) {}
void dladdr1(void) {}
void dlinfo(void) {}

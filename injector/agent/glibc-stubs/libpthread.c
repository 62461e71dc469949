/* Link-time stand-in for libpthread.so.0 before glibc 2.34 (README). */
void pthread_key_create(void) {}
void pthread_key_delete(void) {}
void pthread_getspecific(void) {}
void pthread_setspecific(void) {}
void pthread_mutex_trylock(void) {}
void pthread_once(void) {}
void pthread_sigmask(void) {}

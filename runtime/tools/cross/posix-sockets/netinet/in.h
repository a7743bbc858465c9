#include "../posix_sockets.h" /* the POSIX header, on Winsock */

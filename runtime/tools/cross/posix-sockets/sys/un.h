#include "../posix_sockets.h" /* the POSIX header, on Winsock */
#include <afunix.h>         /* struct sockaddr_un (Windows 10 has AF_UNIX) */

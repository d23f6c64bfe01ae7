# The pytorch/examples VAE, beta-weighted: BCE summed over pixels plus the KL term,
# computed in the script and added up (no loss class), printed per sample as the
# example prints it.
import torch
import torch.utils.data
from torch import nn, optim
from torch.nn import functional as F

batch_size = 16
beta = 4.0
torch.manual_seed(1)

# stand-in for MNIST: blobs of light on 14x14 pictures, in [0, 1]
yy, xx = torch.meshgrid(torch.arange(14.0), torch.arange(14.0), indexing="ij")
centres = torch.rand(128, 2) * 10 + 2
images = torch.exp(
    -((yy - centres[:, 0, None, None]) ** 2 + (xx - centres[:, 1, None, None]) ** 2) / 6
)
dataset = torch.utils.data.TensorDataset(images.unsqueeze(1), torch.zeros(128))
train_loader = torch.utils.data.DataLoader(dataset, batch_size=batch_size, shuffle=True)


class VAE(nn.Module):
    def __init__(self):
        super().__init__()

        self.fc1 = nn.Linear(196, 64)
        self.fc21 = nn.Linear(64, 8)
        self.fc22 = nn.Linear(64, 8)
        self.fc3 = nn.Linear(8, 64)
        self.fc4 = nn.Linear(64, 196)

    def encode(self, x):
        h1 = F.relu(self.fc1(x))
        return self.fc21(h1), self.fc22(h1)

    def reparameterize(self, mu, logvar):
        std = torch.exp(0.5 * logvar)
        eps = torch.randn_like(std)
        return mu + eps * std

    def decode(self, z):
        h3 = F.relu(self.fc3(z))
        return torch.sigmoid(self.fc4(h3))

    def forward(self, x):
        mu, logvar = self.encode(x.view(-1, 196))
        z = self.reparameterize(mu, logvar)
        return self.decode(z), mu, logvar


model = VAE()
optimizer = optim.Adam(model.parameters(), lr=1e-3)


# Reconstruction + KL divergence losses summed over all elements and batch
def loss_function(recon_x, x, mu, logvar):
    BCE = F.binary_cross_entropy(recon_x, x.view(-1, 196), reduction="sum")

    # see Appendix B from VAE paper:
    # Kingma and Welling. Auto-Encoding Variational Bayes. ICLR, 2014
    # 0.5 * sum(1 + log(sigma^2) - mu^2 - sigma^2)
    KLD = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())

    return BCE + beta * KLD


def train(epoch):
    model.train()
    train_loss = 0
    for batch_idx, (data, _) in enumerate(train_loader):
        optimizer.zero_grad()
        recon_batch, mu, logvar = model(data)
        loss = loss_function(recon_batch, data, mu, logvar)
        loss.backward()
        train_loss += loss.item()
        optimizer.step()
        if batch_idx % 2 == 0:
            print(
                f"Train Epoch: {epoch} [{batch_idx * len(data)}/{len(train_loader.dataset)}]\tLoss: {loss.item() / len(data):.6f}"
            )


for epoch in range(1, 2):
    train(epoch)
